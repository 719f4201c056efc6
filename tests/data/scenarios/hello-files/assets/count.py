from pathlib import Path

Path("count.txt").write_text(str(len(Path("greeting.txt").read_text().split())))
