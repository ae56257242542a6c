"""REAL values carry Java 17's Float.toString digits in Debezium's JSON (the JDK the golden files
were recorded with, tests/conformance/sqlserver/*/PROVENANCE.md): Headwater's port of its
algorithm against the JVM itself, for random floats and every binade's edges."""

from __future__ import annotations

import random
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from emulators.sqlserver.jvm.launch import JvmError, java_executable
from headwater.connectors.sqlserver.types import _float32

PROGRAM = """
import java.io.*;
public class FloatText {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            out.append(Float.toString(Float.intBitsToFloat((int) Long.parseLong(line.trim())))).append('\\n');
        }
        System.out.print(out);
    }
}
"""


def _java17() -> str:
    try:
        java = java_executable()
    except JvmError as exc:
        pytest.skip(str(exc))
    version = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    if '"17.' not in version:
        candidates = sorted(Path("/usr/lib/jvm").glob("*17*/bin/java"))
        if not candidates:
            pytest.skip(f"no JDK 17 (Float.toString changed in JDK 19): {version.splitlines()[0]}")
        java = str(candidates[0])
    return java


def test_real_digits_are_java_17s() -> None:
    java = _java17()
    rng = random.Random(21)
    bits = [rng.getrandbits(32) for _ in range(30_000)]
    bits = [b for b in bits if (b >> 23) & 0xFF != 0xFF]
    for exponent in range(255):  # powers of two and the ends of every binade, subnormals included
        bits += [exponent << 23, (exponent << 23) | 1, (exponent << 23) | 0x7FFFFF]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "FloatText.java"
        source.write_text(PROGRAM)
        stdin = "".join(f"{b - (1 << 32) if b >> 31 else b}\n" for b in bits)
        res = subprocess.run([java, str(source)], input=stdin, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    java_texts = res.stdout.split()
    assert len(java_texts) == len(bits)
    wrong = []
    for b, text in zip(bits, java_texts):
        value = struct.unpack(">f", struct.pack(">I", b))[0]
        got = _float32(value)
        if got != float(text) or (got == 0 and str(got)[0] != text[0]):
            wrong.append((hex(b), text, got))
    assert not wrong, wrong[:10]
    # not the shortest digits: the golden files' float(24) extreme
    assert _float32(1.1754943508222875e-38) == 1.17549435e-38
