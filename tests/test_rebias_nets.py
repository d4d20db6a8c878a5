"""ReBias networks: BagNet18's receptive field measured from input gradients is 43; the 1x1
SimpleConvNet sees one pixel, the 7x7 one a 25-pixel window."""

import pytest
import torch

from debias_workbench.training.methods.rebias_nets import BagNet18, SimpleConvNet


def _receptive_field(feature_map, size: int) -> int:
    """Side of the input region whose pixels change the centre unit of the last feature map."""
    x = torch.randn(1, 3, size, size, requires_grad=True)
    fmap = feature_map(x)
    fmap[0, :, fmap.shape[2] // 2, fmap.shape[3] // 2].sum().backward()
    rows = torch.nonzero(x.grad[0].abs().sum((0, 2)) > 0).flatten()
    cols = torch.nonzero(x.grad[0].abs().sum((0, 1)) > 0).flatten()
    assert rows.numel() and cols.numel()
    return int(max(rows.max() - rows.min() + 1, cols.max() - cols.min() + 1))


def test_bagnet18_receptive_field_is_43():
    torch.manual_seed(0)
    net = BagNet18(9).eval()  # eval: batch-norm statistics must not mix positions across the batch
    assert _receptive_field(net.feature_map, 128) == 43
    assert net(torch.randn(2, 3, 64, 64)).shape == (2, 9)


@pytest.mark.parametrize("kernel, field", [(1, 1), (7, 25)])
def test_simple_convnet_receptive_field(kernel, field):
    net = SimpleConvNet(10, kernel).eval()
    assert _receptive_field(net.body, 28) == field
    assert net.features(torch.randn(4, 3, 28, 28)).shape == (4, 128)


def test_simple_convnet_is_initialised_as_the_authors():
    """Kaiming-normal with fan_out (std sqrt(2 / (c_out k^2))) and a conv bias, as ReBias's
    models/mnist_models.py; PyTorch's default (kaiming-uniform, a = sqrt(5)) would give std
    1 / sqrt(3 c_in k^2): 0.029 against 0.021 for the second 7x7 layer."""
    import math

    torch.manual_seed(0)
    conv = SimpleConvNet(10, 7).body[3]          # 16 -> 32 channels, 7x7
    assert conv.bias is not None
    assert float(conv.weight.std()) == pytest.approx(math.sqrt(2 / (32 * 49)), rel=0.05)
