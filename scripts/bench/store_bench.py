"""Store benchmark: CAS update latency and watcher throughput, on its own etcd.

    python scripts/bench/store_bench.py [--updates 2000] [--events 20000]

Prints, from one run:
* the latency of a guarded update (``Store.update``: a transaction comparing
  mod_revision) beside an unguarded put through the same gateway (the floor);
* the events/s one watcher receives while 8 threads create keys one by one,
  and while keys are written in transactions of 128 (etcd's own write rate
  is printed beside it: the watcher cannot be faster than the writes);
* the rate at which a watcher replays a backlog: its own ceiling.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable

from berth.store import EtcdConfig, Put, Store, Watch, keys
from berth.store.ops import b64
from berth_testkit.figures import pct
from berth_testkit.servers.etcd import EtcdServer


def cas_latency(store: Store, n: int) -> None:
    key = keys.bench_key("cas")
    rev = store.create(key, b"0")
    cas: list[float] = []
    for i in range(n):
        t = time.perf_counter()
        rev = store.update(key, str(i).encode(), rev)
        cas.append(time.perf_counter() - t)
    raw: list[float] = []
    for i in range(n):
        t = time.perf_counter()
        store.call("kv/put", {"key": b64(key + "-raw"), "value": b64(str(i))}, "put")
        raw.append(time.perf_counter() - t)
    c50, r50 = statistics.median(cas) * 1e3, statistics.median(raw) * 1e3
    print(f"CAS update ({n} sequential): p50 {c50:.2f} ms, p99 {pct(cas, 0.99) * 1e3:.2f} ms")
    print(f"raw put    ({n} sequential): p50 {r50:.2f} ms, p99 {pct(raw, 0.99) * 1e3:.2f} ms")
    print(f"  ratio CAS/raw (p50): {c50 / r50:.2f}")


def watch_rate(store: Store, prefix: keys.Prefix, total: int, write: Callable[[], object]) -> None:
    start = store.revision() + 1
    received = 0
    done = threading.Event()
    first: list[float] = []
    watch = Watch(store, prefix, start)

    def read() -> None:
        nonlocal received
        for batch in watch:
            if batch.events and not first:
                first.append(time.perf_counter())
            received += len(batch.events)
            if received >= total:
                done.set()
                return

    reader = threading.Thread(target=read)
    reader.start()
    began = time.perf_counter()
    write()
    wrote = time.perf_counter() - began
    done.wait(120)
    got = time.perf_counter() - began
    watch.close()
    reader.join(5)
    print(f"  writes: {total / wrote:.0f}/s; watcher received {received}/{total} "
          f"in {got:.2f}s: {received / got:.0f} events/s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20000)
    args = parser.parse_args()
    server = EtcdServer().start()
    try:
        store = Store(EtcdConfig(url=server.url))
        print(f"etcd {server.bindir.name} at {server.url}")
        cas_latency(store, args.updates)

        burst = 2000
        print(f"burst of {burst} creates from 8 threads:")

        def threads() -> None:
            def one(t: int) -> None:
                for i in range(burst // 8):
                    store.create(keys.bench_key(f"burst/{t}/{i}"), b"x")
            ws = [threading.Thread(target=one, args=(t,)) for t in range(8)]
            for w in ws:
                w.start()
            for w in ws:
                w.join()

        watch_rate(store, keys.bench_prefix("burst"), burst, threads)

        print(f"{args.events} puts in transactions of 128:")
        ops = [Put(keys.bench_key(f"txn/{i:06d}"), b"x" * 200) for i in range(args.events)]
        watch_rate(store, keys.bench_prefix("txn"), args.events, lambda: store.commit_chunks(ops))

        print(f"replay of a backlog of {args.events} events (the watcher's own ceiling):")
        first = store.revision() + 1
        store.commit_chunks([Put(keys.bench_key(f"replay/{i:06d}"), b"x" * 200)
                             for i in range(args.events)])
        began, received = time.perf_counter(), 0
        replay = Watch(store, keys.bench_prefix("replay"), first)
        for batch in replay:
            received += len(batch.events)
            if received >= args.events:
                break
        replay.close()
        took = time.perf_counter() - began
        print(f"  {received} events in {took:.2f}s: {received / took:.0f} events/s")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
