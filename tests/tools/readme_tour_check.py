#!/usr/bin/python3
"""README.md's "A tour of the CLI" runs as written: every command of its first sh block, with the
paths it names standing for small fixtures (a CIFAR-10 binary set and an image folder of a few
images, the README's own TOML, a run directory made by the tour's first train) and small sizes
appended to each train (--iterations, --eval-every, --eval-images, --batch, --progress none and
an --out of its own, each only where the command does not give it). Every command must exit 0;
the GPU ones where there is no GPU must be refused in one line naming --device (train exits 2,
topology 1 when the CUDA runtime cannot start).

usage: readme_tour_check.py SOURCE_ROOT BUILD_ROOT
"""
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT, BUILD = sys.argv[1], sys.argv[2]
EASEL = os.path.join(BUILD, "tools", "easel")
SMALL = [("--iterations", "2"), ("--eval-every", "2"), ("--eval-images", "64"), ("--batch", "8"),
         ("--progress", "none")]


def tour(readme):
    """The tour's sh block as commands: continuations joined, comments and blank lines dropped;
    and the section's TOML block (the README's config file)."""
    text = open(readme, encoding="utf-8").read()
    section = text[text.index("## A tour of the CLI"):]
    section = section[:section.index("\n## ", 1)]
    sh = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    toml = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    commands = [c.strip() for c in sh.replace("\\\n", " ").split("\n")]
    return [c for c in commands if c and not c.startswith("#")], toml


def png(path, side, shade):
    """A side x side RGB PNG of one colour (zlib, no imaging library)."""
    raw = b"".join(b"\0" + bytes(shade) * side for _ in range(side))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def fixtures(home):
    """~/cifar-10-batches-bin (16 records per file) and ~/imagenette (2 classes, 8 train and 2
    val images each, 72 x 72)."""
    cifar = os.path.join(home, "cifar-10-batches-bin")
    os.makedirs(cifar)
    for name in ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]:
        with open(os.path.join(cifar, name), "wb") as f:
            for r in range(16):
                f.write(bytes([r % 10]) + bytes((r * 7 + i) % 256 for i in range(3072)))
    for split, n in (("train", 8), ("val", 2)):
        for c, shade in (("cat", (200, 40, 40)), ("dog", (40, 40, 200))):
            d = os.path.join(home, "imagenette", split, c)
            os.makedirs(d)
            for i in range(n):
                png(os.path.join(d, "%d.png" % i), 72, [(s + 9 * i) % 256 for s in shade])


def has_gpu():
    t = subprocess.run([EASEL, "topology"], capture_output=True, text=True)
    return "GPUs: none" not in t.stdout


def prepare(command, home, work, n, resumes):
    """The command as argv (and its environment), the tour's paths made the fixtures', small
    sizes appended to a train: the n-th fresh one (from 0) gets an --out of its own, the first
    becoming the run the tour resumes; a resume (the resumes-th before it) two more iterations."""
    command = command.replace("$HOME", home).replace("~/", home + "/")
    command = command.replace("runs/DATE-TIME-sync-easgd", os.path.join(work, "runs", "tour-sync-easgd"))
    words = shlex.split(command, comments=True)
    env = dict(os.environ, HOME=home)
    while words and "=" in words[0] and not words[0].startswith("-"):
        k, v = words.pop(0).split("=", 1)
        env[k] = os.path.join(ROOT, v) if v.startswith("tests/") else v
    if words[0] == "build/tools/easel":
        words[0] = EASEL
    words = [os.path.join(ROOT, w) if w.startswith("docs/") else w for w in words]
    if len(words) > 1 and words[1] == "train" and "--help" not in words:
        given = {w.split("=")[0] for w in words}
        resume = "--resume" in given
        for flag, value in SMALL:
            if flag == "--iterations" and resume:
                value = str(2 * (resumes + 2))  # past the run's last length
            if flag not in given and not (resume and flag == "--batch"):
                words += [flag, value]
        if not resume:
            out = "tour-sync-easgd" if n == 0 else "tour-%d" % n
            words += ["--out", os.path.join(work, "runs", out), "--overwrite"]
    return words, env


def main():
    commands, toml = tour(os.path.join(ROOT, "README.md"))
    gpu = has_gpu()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="easel-tour-") as work:
        home = os.path.join(work, "home")
        fixtures(home)
        with open(os.path.join(work, "run.toml"), "w") as f:
            f.write(toml)
        # The tour's first train run becomes runs/DATE-TIME-sync-easgd, which --resume continues.
        trains = resumes = 0
        for command in commands:
            if command.startswith("source <("):
                argv, env = ["bash", "-c", command.replace("build/tools/easel", EASEL)], None
            else:
                is_train = " train " in command + " " and "--help" not in command
                argv, env = prepare(command, home, work, trains, resumes)
                trains += is_train and "--resume" not in command
                resumes += is_train and "--resume" in command
            t = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
            if "--device cuda" in command and not gpu:  # refused, naming --device (topology: 1)
                ok = t.returncode in (1, 2) and t.stderr.count("\n") == 1 and "--device" in t.stderr
            else:
                ok = t.returncode == 0
            print("%s %s" % ("ok  " if ok else "FAIL", command))
            if not ok:
                print("     exit %d: %s" % (t.returncode, (t.stderr or t.stdout).strip()[-600:]))
                failed += 1
    print("readme_tour_check: %d command(s), %d failed" % (len(commands), failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
