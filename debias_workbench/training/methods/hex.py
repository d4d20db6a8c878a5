"""HEX (Wang, He, Lipton & Xing, ICLR 2019): learn a representation whose predictions carry no
more information than the "superficial statistics" captured by a neural grey-level
co-occurrence matrix (NGLCM) can explain, by projecting the NGLCM's prediction subspace out.
ReBias's Table 1 uses it as the texture-bias baseline ("we substitute G with the NGLCM").
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from .base import Method
from .ssl_augment import gray


class NGLCM(nn.Module):
    """Neural grey-level co-occurrence matrix (HEX Sec. 3.1), differentiable in its parameters.

    Each pixel p of a grey image in [0, 1] is softly assigned to `levels` grey levels with
    learnable centres (one set for the reference pixel, one for its neighbour at `offset`,
    as HEX's separate a/b parameters): a_k(p) = softmax_k(-(I_p - c_k)^2 / (2 w^2)). The
    co-occurrence matrix is G_kl = mean_p a_k(p) b_l(p + offset), flattened to levels^2 features.
    """

    def __init__(self, levels: int = 16, offset: tuple[int, int] = (0, 1)):
        super().__init__()
        self.offset = offset
        self.centres_a = nn.Parameter(torch.linspace(0, 1, levels))
        self.centres_b = nn.Parameter(torch.linspace(0, 1, levels))
        self.log_width = nn.Parameter(torch.tensor(1.0 / levels).log())
        self.out_dim = levels * levels

    def _assign(self, grey: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
        """(B, P) grey levels -> (B, P, K) soft level memberships."""
        d2 = (grey.unsqueeze(-1) - centres) ** 2
        return torch.softmax(-d2 / (2 * self.log_width.exp() ** 2), dim=-1)

    def forward(self, grey: torch.Tensor) -> torch.Tensor:
        """grey (B, H, W) in [0, 1] -> (B, K*K) co-occurrence features."""
        dy, dx = self.offset
        h, w = grey.shape[1:]
        ref = grey[:, : h - dy, : w - dx].flatten(1)  # (B, P)
        nbr = grey[:, dy:, dx:].flatten(1)  # (B, P), the pixel at `offset` from ref
        a, b = self._assign(ref, self.centres_a), self._assign(nbr, self.centres_b)
        return torch.einsum("bpk,bpl->bkl", a, b).flatten(1) / ref.shape[1]


def project_out(f_p: torch.Tensor, f_g: torch.Tensor, ridge: float = 1e-4) -> torch.Tensor:
    """HEX's projection over the batch, F_L = (I - F_G (F_G^T F_G)^-1 F_G^T) F_P: the part of
    the joint logits F_P (B, C) orthogonal to the column space of the NGLCM logits F_G (B, C).
    A small ridge keeps F_G^T F_G (C x C) invertible for batches smaller than C."""
    gram = f_g.T @ f_g + ridge * torch.eye(f_g.shape[1], device=f_g.device, dtype=f_g.dtype)
    return f_p - f_g @ torch.linalg.solve(gram, f_g.T @ f_p)


class HEX(Method):
    """F's features h_A and the NGLCM's features h_G share one linear output layer:
    F_A = W_A h_A + b (F's own head), F_G = W_G h_G, F_P = F_A + F_G. Training minimises
    CE(F_L) with F_L = `project_out`(F_P, F_G); prediction uses F_A alone (HEX Sec. 3.2), so
    `predict()` is F's. h_G = ReLU(Linear(NGLCM(grey image))) of width `nglcm_dim`."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.nglcm = NGLCM(int(self.args["levels"]))
        self.nglcm_fc = nn.Sequential(nn.Linear(self.nglcm.out_dim, int(self.args["nglcm_dim"])), nn.ReLU())
        self.head_g = nn.Linear(int(self.args["nglcm_dim"]), num_classes, bias=False)  # W_G
        self.optimizer = self.make_optimizer(self.parameters())

    def grey(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised images (B, 3, H, W) -> grey levels (B, H, W) in [0, 1]."""
        aug = self.augmenter
        rgb = (x * aug.std.to(x.device, non_blocking=True) + aug.mean.to(x.device, non_blocking=True)).clamp(0, 1)
        return gray(rgb)[:, 0]  # the grey level the co-occurrence statistics are taken over

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        with self.autocast():
            f_a = self.network(x).float()  # (B, C)
        f_g = self.head_g(self.nglcm_fc(self.nglcm(self.grey(x))))  # (B, C)
        f_l = project_out(f_a + f_g, f_g, self.args["ridge"])
        loss = F.cross_entropy(f_l, y)
        self.step(self.optimizer, loss)
        return {
            "loss": loss.detach(),
            "train_acc": (f_a.argmax(1) == y).float().mean().detach(),
            "train_acc_projected": (f_l.argmax(1) == y).float().mean().detach(),
        }
