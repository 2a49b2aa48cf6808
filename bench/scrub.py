"""Cost of scrubbing hostile text against ordinary text of the same length, per character.

Hostile text is built of near-misses of the patterns the collector scrubs (a long local
part before a lone '@', a long run of spaced digits that fail Luhn): a pattern that
backtracks shows here as a ratio far above 1. Both are measured in this run, in CPU time.

    python bench/scrub.py [--chars 400000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

from pathgrade.collector.redact import RedactionConfig, Redactor


def hostile_text(chars: int) -> str:
    """Near-misses of the e-mail and card patterns, about `chars` long."""
    half = chars // 2
    return "a" * half + "@" + "1 " * (half // 2)


def ordinary_text(chars: int) -> str:
    """Prose with no personal data, about `chars` long."""
    sentence = "The order shipped on Tuesday and the customer asked about the refund. "
    return (sentence * (chars // len(sentence) + 1))[:chars]


def cpu_us_per_char(redactor: Redactor, text: str, repeat: int) -> float:
    """Best CPU time of `repeat` scrubs of `text`, in µs per character."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        redactor.scanner.scrub(text)  # the scanner itself: scrub_text's cache is bypassed
        best = min(best, time.process_time() - started)
    return best / len(text) * 1e6


def main() -> None:
    """Print both costs and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    redactor = Redactor(RedactionConfig())
    hostile = cpu_us_per_char(redactor, hostile_text(args.chars), args.repeat)
    ordinary = cpu_us_per_char(redactor, ordinary_text(args.chars), args.repeat)
    print(f"ordinary text: {ordinary:.4f} µs/char")
    print(f"hostile text:  {hostile:.4f} µs/char")
    print(f"hostile / ordinary: {hostile / ordinary:.2f}")


if __name__ == "__main__":
    main()
