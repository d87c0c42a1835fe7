#!/usr/bin/env python3
"""Decrypting SOPS files: Konfig (in process) against the sops CLI (hack/sops), same files.

    .venv/bin/python hack/bench_secrets.py [--values N] [--files F] [--repeat R]

Writes F files of N string values each (encrypted by Konfig for one age key), then
times R rounds of decrypting all of them: Konfig's sopsfile.read + decrypt (MAC
checked) in this process, and one `sops decrypt` process per file. Prints wall and
CPU seconds for each (CPU: this process for Konfig, the children for sops) and the
ratio. Builds sops first if needed (hack/sops build).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from konfig.secrets import sopsfile
from konfig.secrets.keys import Keyring

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=50)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bin_dir = Path(
        subprocess.run(
            [str(REPO / "hack" / "sops"), "build"], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    keyring, key_text = Keyring.generate()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        key_file = root / "age.key"
        key_file.write_text(key_text)
        files = []
        for f in range(args.files):
            data = {"s": {f"k{i}": f"value-{f}-{i}-" + "x" * 40 for i in range(args.values)}}
            path = root / f"f{f}.enc.yaml"
            path.write_text(sopsfile.encrypt(data, keyring.recipients, name=path.name))
            files.append(path)

        def konfig_round() -> None:
            for path in files:
                sopsfile.decrypt(sopsfile.read(path), keyring)

        env = {**os.environ, "SOPS_AGE_KEY_FILE": str(key_file), "HOME": tmp}

        def sops_round() -> None:
            for path in files:
                subprocess.run(
                    [str(bin_dir / "sops"), "decrypt", str(path)],
                    env=env,
                    check=True,
                    capture_output=True,
                )

        results = {}
        for name, fn, who in (
            ("konfig", konfig_round, resource.RUSAGE_SELF),
            ("sops", sops_round, resource.RUSAGE_CHILDREN),
        ):
            before = resource.getrusage(who)
            start = time.perf_counter()
            for _ in range(args.repeat):
                fn()
            wall = time.perf_counter() - start
            after = resource.getrusage(who)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            results[name] = (wall, cpu)
    total = args.files * args.repeat
    print(f"{args.files} files x {args.values} values, {args.repeat} rounds ({total} decrypts)")
    for name, (wall, cpu) in results.items():
        print(
            f"  {name:7} wall {wall:7.3f} s  cpu {cpu:7.3f} s  "
            f"({wall / total * 1000:.1f} ms wall per file)"
        )
    ratio = results["sops"][0] / results["konfig"][0]
    print(f"  sops/konfig wall ratio: {ratio:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
