"""The model, the data and ONE training step -- the part of the lab you change.

Data: scikit-learn's bundled handwritten digits (8x8 pixels, 1,797 images, no download).
Model: a fully connected network whose width (--hidden) sets how much arithmetic a step
does: small on a CPU, large on a GPU, where small matrices cannot keep the chip busy.
"""

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn


def data(device: torch.device) -> tuple[torch.Tensor, ...]:
    """Train and test tensors on `device`: pixels scaled to [0, 1], labels 0-9."""
    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(x / 16.0, y, test_size=0.25, random_state=0,
                                              stratify=y)
    as_x = lambda a: torch.tensor(a, dtype=torch.float32, device=device)  # noqa: E731
    as_y = lambda a: torch.tensor(a, dtype=torch.int64, device=device)  # noqa: E731
    return as_x(x_tr), as_y(y_tr), as_x(x_te), as_y(y_te)


def make_model(hidden: int, device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(64, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, 10),
    ).to(device)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor, bf16: bool = False) -> torch.Tensor:
    """One step: forward, loss, backward, update. Returns the loss.

    bf16=True asks for mixed precision: the forward pass and the loss should run under
    torch.autocast with dtype torch.bfloat16 on x's device type (step 2 of the lab). The
    backward pass and the optimizer step stay outside the autocast block.
    """
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    return loss.detach()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, bf16: bool = False) -> float:
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
        return (model(x).argmax(1) == y).float().mean().item()
