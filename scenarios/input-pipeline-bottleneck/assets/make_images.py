"""Write the lab's image files: scikit-learn's bundled digits (1,797 images of 8x8 pixels, no
download), enlarged to 128x128 and saved as one PNG file each, the way photos sit on disk:
compressed, so every read means decoding again.

Usage: python make_images.py [--out data]
"""

import argparse
import csv
from pathlib import Path

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits

SIZE = 128


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="data")
    args = ap.parse_args()
    out = Path(args.out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    images, labels = load_digits(return_X_y=True)
    with open(out / "labels.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file", "label"])
        for i, (pixels, label) in enumerate(zip(images, labels, strict=True)):
            small = Image.fromarray((pixels.reshape(8, 8) * 255 / 16).astype(np.uint8))
            name = f"{i:05d}.png"
            small.resize((SIZE, SIZE), Image.BILINEAR).save(out / "images" / name)
            writer.writerow([name, int(label)])
    print(f"wrote {len(labels)} PNG files of {SIZE}x{SIZE} pixels to {out / 'images'}")


if __name__ == "__main__":
    main()
