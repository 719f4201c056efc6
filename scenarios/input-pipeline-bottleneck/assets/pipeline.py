"""The input pipeline of this lab's training loop, as many image pipelines start out: one
sample at a time, each read from its PNG file, decoded, randomly cropped (augmentation) and
shrunk to the 16x16 pixels the model sees.

measure.py imports this file (or a copy you name with --pipeline) and calls make_loader():
keep its signature. It must yield (images, labels): images a float tensor of shape
(batch, 1, 16, 16) with values in [0, 1], labels an int64 tensor of shape (batch,), and every
sample exactly once per epoch.
"""

import csv
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

SIZE = 16   # pixels the model sees
CROP = 112  # random square cut out of each 128x128 file before shrinking


def read_index(root: str) -> tuple[list[Path], torch.Tensor]:
    """The image files and their labels, from data/labels.csv."""
    with open(Path(root) / "labels.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    files = [Path(root) / "images" / r["file"] for r in rows]
    return files, torch.tensor([int(r["label"]) for r in rows])


class DigitFiles(Dataset):
    """One sample per call: open, decode, crop, shrink."""

    def __init__(self, root: str) -> None:
        self.files, self.labels = read_index(root)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        with Image.open(self.files[i]) as im:
            im = im.convert("L")
            left, top = torch.randint(0, im.width - CROP + 1, (2,)).tolist()
            im = im.crop((left, top, left + CROP, top + CROP))
            im = im.resize((SIZE, SIZE), Image.BILINEAR)
            pixels = np.asarray(im, dtype=np.float32) / 255.0
        return torch.from_numpy(pixels).unsqueeze(0), self.labels[i]


def make_loader(root: str = "data", batch_size: int = 64, device: str = "cpu"):
    """Batches of (images, labels) for one epoch each time it is iterated.

    `device` is where the training runs: a pipeline may put its batches there itself
    (measure.py moves them when they are elsewhere)."""
    return DataLoader(DigitFiles(root), batch_size=batch_size, shuffle=True)
