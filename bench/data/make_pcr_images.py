#!/usr/bin/python3
"""make_pcr_images.py — a JPEG data set from photographs shipped in Debian
packages (scikit-learn's, scikit-image's and matplotlib's sample images),
for the PCR tests, demo and benchmark. Nothing is downloaded.

Each image is a random crop of one source photo (flipped or not), rescaled
so its shorter side is 96..384 pixels, and saved as a baseline JPEG at a
random quality (50..95) and chroma subsampling; grayscale sources stay
grayscale. The label of an image is the name of its source photo.

    /usr/bin/python3 bench/data/make_pcr_images.py [--count 3000] [--seed 1] OUTDIR

writes OUTDIR/img-00000.jpg ... and OUTDIR/labels.csv (file,label).
"""
import argparse
import os
import random
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit("make_pcr_images.py: needs python3-pil (apt-get install python3-pil)")

SK = "/usr/lib/python3/dist-packages/skimage/data/"
SOURCES = [
    ("china", "/usr/lib/python3/dist-packages/sklearn/datasets/images/china.jpg"),
    ("flower", "/usr/lib/python3/dist-packages/sklearn/datasets/images/flower.jpg"),
    ("astronaut", SK + "astronaut.png"),
    ("chelsea", SK + "chelsea.png"),
    ("coffee", SK + "coffee.png"),
    ("rocket", SK + "rocket.jpg"),
    ("retina", SK + "retina.jpg"),
    ("hubble", SK + "hubble_deep_field.jpg"),
    ("motorcycle", SK + "motorcycle_left.png"),
    ("ihc", SK + "ihc.png"),
    ("camera", SK + "camera.png"),
    ("moon", SK + "moon.png"),
    ("coins", SK + "coins.png"),
    ("brick", SK + "brick.png"),
    ("grass", SK + "grass.png"),
    ("gravel", SK + "gravel.png"),
    ("hopper", "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"),
]


def load_sources():
    out = []
    for label, path in SOURCES:
        if not os.path.exists(path):
            continue
        im = Image.open(path)
        im.load()
        if im.mode not in ("L", "RGB"):
            im = im.convert("RGB")
        out.append((label, im))
    if len(out) < 2:
        sys.exit("make_pcr_images.py: no sample photos found (python3-sklearn, python3-skimage)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    srcs = load_sources()
    os.makedirs(a.outdir, exist_ok=True)
    rows = []
    for i in range(a.count):
        label, im = srcs[i % len(srcs)]
        w, h = im.size
        side = rng.uniform(0.3, 1.0) * min(w, h)
        aspect = rng.uniform(0.75, 1.33)
        cw, ch = min(w, int(side * aspect)), min(h, int(side))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        crop = im.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        short = rng.randint(96, 384)
        scale = short / min(cw, ch)
        crop = crop.resize((max(16, round(cw * scale)), max(16, round(ch * scale))), Image.BICUBIC)
        name = "img-%05d.jpg" % i
        kw = {"quality": rng.choice([50, 75, 85, 90, 95])}
        if crop.mode == "RGB":
            kw["subsampling"] = rng.choice([0, 2, 2])  # 4:4:4 or 4:2:0
        crop.save(os.path.join(a.outdir, name), "JPEG", **kw)
        rows.append((name, label))
    with open(os.path.join(a.outdir, "labels.csv"), "w") as f:
        f.write("file,label\n")
        for name, label in rows:
            f.write("%s,%s\n" % (name, label))
    gray = sum(1 for i in range(a.count) if srcs[i % len(srcs)][1].mode == "L")
    print("%d JPEGs (%d grayscale) from %d photos in %s" % (a.count, gray, len(srcs), a.outdir))


if __name__ == "__main__":
    main()
