"""The snippets' split-text cache is bounded by bytes as well as entries: 4,096 entries of
about 30 kB (a 1.5 kB chunk, tracemalloc) are 122 MB, but 4,096 chunks of a megabyte held gigabytes
(the cache counted entries only). ``plait.byte_cache`` drops the least recently used
entries past ``TEXT_CACHE_BYTES`` (128 MiB) and never keeps one larger than the budget."""

from __future__ import annotations

import gc
import random
import string
import sys
import tracemalloc

from plait import snippets
from plait.byte_cache import ByteLRU, byte_lru_cache


def test_entries_past_the_byte_budget_are_dropped_least_recently_used_first() -> None:
    calls: list[str] = []

    @byte_lru_cache(maxsize=10, max_bytes=100, size=lambda args, value: len(value))
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    upper(a), upper(b), upper(a)  # a is now the most recently used
    assert upper.cache_info() == (1, 2, 10, 2, 80)
    upper(c)  # 120 bytes > 100: b, the least recently used, goes
    assert upper.cache_info().currbytes == 80 and upper.cache_info().currsize == 2
    upper(a), upper(c)
    assert calls == [a, b, c]  # both still cached
    upper(b)
    assert calls == [a, b, c, b]  # b was dropped; a goes now (c and b were used after it)
    assert upper.cache_info().currbytes == 80
    big = "d" * 150
    assert upper(big) == big.upper() and upper(big) == big.upper()
    assert calls[-2:] == [big, big]  # larger than the whole budget: never kept
    assert upper.cache_info().currbytes == 80
    upper.cache_clear()
    assert upper.cache_info() == (0, 0, 10, 0, 0)


def test_the_count_bound_still_holds() -> None:
    cache: ByteLRU[[int], int] = ByteLRU(lambda n: n * 2, maxsize=3, max_bytes=1000, size=lambda args, value: 1)
    for n in range(5):
        cache(n)
    assert cache.cache_info().currsize == 3 and cache.cache_info().currbytes == 3


def test_huge_chunks_do_not_hold_more_than_the_budget() -> None:
    snippets._hit_words.cache_clear()
    words = " ".join(f"word{i % 5000} rotate keys" for i in range(40_000))  # ~0.8 MB of text
    sizes = []
    for n in range(16):
        split = snippets._hit_words(f"chunk {n} {words}", False, None)
        sizes.append(snippets._split_bytes((f"chunk {n} {words}", False, None), split))
    info = snippets._hit_words.cache_info()
    assert min(sizes) > 4 << 20  # each chunk holds several MB split
    assert info.currbytes <= snippets.TEXT_CACHE_BYTES == 128 << 20
    kept = max(k for k in range(17) if sum(sizes[16 - k :]) <= snippets.TEXT_CACHE_BYTES)
    assert info.currsize == kept < 16 and info.currbytes == sum(sizes[16 - kept :])  # the latest ones
    last = f"chunk 15 {words}"
    before = snippets._hit_words.cache_info().hits
    snippets._hit_words(last, False, None)
    assert snippets._hit_words.cache_info().hits == before + 1
    snippets._hit_words.cache_clear()


def test_typical_chunks_stay_bound_by_the_entry_count() -> None:
    # a 1.5 kB chunk of prose: 4,096 of them fit the byte budget (the count binds first)
    text = " ".join(f"Rotate the API key number {i} every ninety days; the old key stays valid." for i in range(20))
    assert 1400 <= len(text) <= 1600
    size = snippets._split_bytes((text, False, None), snippets._words_of(text))
    assert snippets.TEXT_CACHE_SIZE * size <= snippets.TEXT_CACHE_BYTES


def _traced_and_counted(texts: list[str]) -> tuple[int, int]:
    """Real bytes the cache holds after splitting ``texts`` (tracemalloc, plus the raw
    keys, allocated before tracing) and what it counts."""
    snippets._hit_words.cache_clear()
    gc.collect()
    tracemalloc.start()
    try:
        for t in texts:
            snippets._hit_words(t, False, None)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    info = snippets._hit_words.cache_info()
    assert info.currsize == len(texts)
    raw = sum(sys.getsizeof(t) for t in texts)
    counted = info.currbytes
    snippets._hit_words.cache_clear()
    return traced + raw, counted


def test_the_byte_budget_counts_the_real_memory_of_texts_of_distinct_words() -> None:
    """Review 6 #4: texts of identifiers (every word distinct) held 1.6-1.8x what the
    cache counted (the words and the intern table were left out). Measured by
    tracemalloc, not by the cache's own estimate: within 5% either way."""
    rng = random.Random(0)
    alphabet = string.ascii_lowercase + string.digits
    ids = [" ".join("".join(rng.choices(alphabet, k=12)) for _ in range(250)) for _ in range(300)]
    traced, counted = _traced_and_counted(ids)
    assert 0.95 * counted <= traced <= 1.05 * counted, (traced, counted)
    prose = [" ".join(rng.choice(["rotate", "key", "service", "dns", "the", "config"]) for _ in range(250)) for _ in range(300)]
    traced, counted = _traced_and_counted(prose)
    assert 0.95 * counted <= traced <= 1.05 * counted, (traced, counted)


def test_the_vocabulary_is_bounded_by_characters_too() -> None:
    """Review 6 #4: 2 kB hyphenated 'words' (minified text) took 2.2 kB each in the
    vocabulary, bounded by count only (65,536 of them: ~144 MiB)."""
    vocabulary = snippets._Vocabulary(1 << 16, max_chars=10_000)
    long_words = ["-".join(f"w{i}x{j}" for j in range(400)) for i in range(12)]  # 2.7k-3.1k chars each
    assert all(2000 < len(w) < 3500 for w in long_words)
    for word in long_words:
        terms, _ = vocabulary.learn([snippets._words_of(word)])
        assert word in terms
        assert sum(map(len, terms)) <= 10_000
    assert len(terms) < 5  # started afresh: at most four 2.4k-char words fit
    small = snippets._Vocabulary(1 << 16)
    for word in long_words:
        terms, _ = small.learn([snippets._words_of(word)])
    assert len(terms) == 12  # the default (4 Mi characters) holds them all
