#!/usr/bin/env python3
"""Prints the first words of the binary fraction of 2/pi as 64-bit hex
constants for codegen/math.c (its Payne-Hanek argument reduction).

pi comes from Machin's formula pi = 16 atan(1/5) - 4 atan(1/239) in
integer fixed point with guard bits, so the table is computed here, not
copied.  Usage: python3 tools/two_over_pi.py [WORDS]"""
import sys


def atan_inv(n, one):
    """atan(1/n) * one, by its Taylor series in integers."""
    total, term, k, sign = 0, one // n, 1, 1
    n2 = n * n
    while term:
        total += sign * (term // k)
        term //= n2
        k += 2
        sign = -sign
    return total


def main():
    words = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    bits = 64 * words + 128          # guard bits
    one = 1 << bits
    pi = 16 * atan_inv(5, one) - 4 * atan_inv(239, one)
    frac = (2 * one * one) // pi      # 2/pi * one, below one
    out = []
    for i in range(words):
        shift = bits - 64 * (i + 1)
        out.append((frac >> shift) & ((1 << 64) - 1))
    for i in range(0, words, 3):
        print("    " + " ".join("0x%016xull," % w for w in out[i:i + 3]))


if __name__ == "__main__":
    main()
