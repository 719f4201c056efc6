"""Write an offline text-classification dataset: short product reviews, positive or
negative, generated from fixed word lists with a fixed seed (no download, same file on
every machine). The generator of the grid-search-pipeline lab, with more rows and rarer
class-specific words, so that each fit takes long enough for parallel work to pay.

Usage: python3 make_data.py [--rows 4000] [--out data/reviews.csv]
"""

import argparse
import csv
import random
from pathlib import Path

POSITIVE = ["great", "excellent", "love", "perfect", "sturdy", "fast", "recommend",
            "happy", "works", "beautiful", "reliable", "comfortable"]
NEGATIVE = ["broken", "poor", "refund", "slow", "cheap", "disappointed", "returned",
            "useless", "noisy", "flimsy", "late", "waste"]
RARE = 1500  # distinct class-specific words per class
NEUTRAL = ["the", "a", "product", "it", "box", "delivery", "price", "item", "was", "is",
           "and", "this", "order", "colour", "size", "battery", "screen", "after", "week"]


def review(rng: random.Random, positive: bool) -> str:
    own, other = (POSITIVE, NEGATIVE) if positive else (NEGATIVE, POSITIVE)
    tag = "p" if positive else "n"
    # Lengths vary a lot (normalising matters); rare class-specific words carry signal
    # that heavy smoothing (a large alpha) washes out.
    words = rng.choices(NEUTRAL, k=rng.choice([5, 8, 30, 60]))
    words += rng.choices(own, k=rng.randint(0, 2))
    words += [f"{tag}{rng.randrange(RARE):04d}" for _ in range(rng.randint(1, 2))]
    words += rng.choices(other, k=rng.choice([0, 0, 1, 2]))  # mixed feelings: label noise
    rng.shuffle(words)
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--out", default="data/reviews.csv")
    args = parser.parse_args()
    rng = random.Random(20240501)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "label"])
        for i in range(args.rows):
            positive = i % 2 == 0
            writer.writerow([review(rng, positive), int(positive)])
    print(f"wrote {args.rows} reviews to {out}")


if __name__ == "__main__":
    main()
