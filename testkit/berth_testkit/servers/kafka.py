"""A real single-node Apache Kafka broker (KRaft) on free loopback ports.

The jars come from ``scripts/install-kafka.sh`` (Maven Central, cached in
``~/.cache/berth``); storage is formatted with ``kafka.tools.StorageTool``
and the broker started with ``kafka.Kafka server.properties``, as Kafka's own
scripts do. ``restart`` keeps the data (committed offsets survive).
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from berth_testkit.servers.etcd import (
    ROOT,
    ServerUnavailable,
    free_port,
    kill_process,
    stop_process,
    tail,
)
from berth_testkit.servers.launch import spawn

INSTALL = ROOT / "scripts" / "install-kafka.sh"
HOW = "Kafka is needed: run scripts/install-kafka.sh (needs java and maven)"


def kafka_home() -> Path:
    try:
        out = subprocess.run(["bash", str(INSTALL)], check=True, capture_output=True, text=True,
                             timeout=1800)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise ServerUnavailable(f"{INSTALL.name} failed: {getattr(exc, 'stderr', '')}\n{HOW}") \
            from None
    return Path(out.stdout.strip().splitlines()[-1])


class KafkaServer:
    def __init__(self) -> None:
        if shutil.which("java") is None:
            raise ServerUnavailable(f"java not found. {HOW}")
        self.home = kafka_home()
        self.workdir = Path(tempfile.mkdtemp(prefix="berth-kafka-"))
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        props = self.workdir / "server.properties"
        props.write_text("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={self.workdir / 'data'}",
            "num.partitions=1", "auto.create.topics.enable=true",
            "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
            "group.initial.rebalance.delay.ms=0", ""]))
        (self.workdir / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
        # One id in 64 starts with "-", which the tool's argument parser takes for
        # an option unless the value is joined to its flag.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                   f"--config={props}", wait=True)

    def _java(self, main: str, *args: str, wait: bool = False) -> subprocess.Popen[bytes]:
        cmd = ["java", "-Xmx512m", "-cp", f"{self.home / 'libs'}/*",
               f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}", main, *args]
        with open(self.workdir / "kafka.log", "ab") as log:
            proc = spawn(cmd, stdout=log, stderr=subprocess.STDOUT)
        if wait and proc.wait(120) != 0:
            raise ServerUnavailable(f"{main} failed:\n{self.log_tail()}")
        return proc

    def start(self, timeout: float = 90.0) -> KafkaServer:
        self.proc = self._java("kafka.Kafka", str(self.workdir / "server.properties"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerUnavailable(f"kafka exited at start:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.3)
        self.kill()
        raise ServerUnavailable(f"kafka did not listen within {timeout}s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return tail(self.workdir / "kafka.log")

    def stop(self) -> None:
        stop_process(self.proc, timeout=30)

    def kill(self) -> None:
        kill_process(self.proc)

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


def produce(bootstrap: str, topic: str, records: list[tuple[str, bytes]]) -> None:
    """Send ``(key, value)`` records and wait until the broker has them."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for key, value in records:
                await producer.send_and_wait(topic, value, key=key.encode())
        finally:
            await producer.stop()

    asyncio.run(send())
