"""Core NATS request/reply, the Evaluate responder's hot loop: nats-py directly vs a FastStream subscriber.

    python benchmarks/request_reply.py [--rounds 5] [--calls 2000]

Issue 10 moved the services' bus handlers onto FastStream unless it costs more than 10% of a hot loop. This
times the one kept on nats-py: sequential EvaluateRequest -> EvaluateResponse round trips over a bundled
nats-server, answered by ``evalsi.bus.requests.RequestServer`` (a nats-py subscription in a queue group) and by
the same server dispatched through FastStream (``evalsi.bus.shared_broker.CoreSubscriber``, its concurrent core
subscriber, with the same reply code), in interleaved rounds. Caller and responder share this process, so the
CPU per request is both sides: the difference between the two is what FastStream's dispatch costs.

It runs on the event loop the services run on (``evalsi.service.kit.event_loop_factory``: uvloop's when installed);
``--loop asyncio`` runs it on asyncio's own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from nats.aio.msg import Msg

from evalsi.bus import Delivery, connect, request
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.requests import RequestServer
from evalsi.bus.shared_broker import CoreSubscriber
from evalsi.errors import InfraError
from evalsi.records import make_record
from evalsi.service.kit import event_loop_factory
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef


class FastStreamRequestServer(RequestServer[EvaluateRequest]):
    """The same responder, its requests dispatched by FastStream instead of a nats-py callback."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._subscriber = CoreSubscriber(self._nc, self.subject, self.queue, self._answer_through_faststream,
                                          concurrency=64)  # fmt: skip

    async def _answer_through_faststream(self, msg: Msg) -> None:
        await self._answer(msg)  # publishes the reply itself: FastStream has nothing left to send

    async def start(self) -> FastStreamRequestServer:
        await self._subscriber.start()
        return self

    async def stop(self, timeout: float = 10.0) -> None:
        await self._subscriber.stop(timeout)


async def _answer(request: EvaluateRequest, _delivery: Delivery) -> EvaluateResponse:
    response = EvaluateResponse(request_id=request.request_id)
    response.results.add(record_id=request.records[0].id, evaluator="builtin/exact-match@1.0.0")
    return response


def _request() -> EvaluateRequest:
    request = EvaluateRequest(evaluators=[EvaluatorRef(ref="exact-match")], request_id="bench")
    request.records.append(
        make_record(id="r1", input="What is the capital of France?", output="Paris", reference="Paris")
    )
    return request


async def _until_answered(nc: Any, subject: str, message: EvaluateRequest, deadline_s: float = 10.0) -> None:
    """FastStream subscribes in the background after its start returns: the first requests can find no responder."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            await request(nc, subject, message, EvaluateResponse, 5)
            return
        except InfraError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def _round(url: str, kind: str, subject: str, calls: int) -> tuple[float, float]:
    """p50 latency in microseconds and process CPU microseconds per request of one round."""
    responder_bus, caller_bus = await connect(url, name=f"responder-{kind}"), await connect(url, name="caller")
    cls = RequestServer if kind == "nats-py" else FastStreamRequestServer
    server = await cls(responder_bus.nc, subject, "bench", _answer, request_type=EvaluateRequest).start()
    message = _request()
    try:
        await _until_answered(caller_bus.nc, subject, message)
        for _ in range(200):  # warm-up
            await request(caller_bus.nc, subject, message, EvaluateResponse, 5)
        latencies = []
        cpu = time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            await request(caller_bus.nc, subject, message, EvaluateResponse, 5)
            latencies.append(time.perf_counter() - started)
        cpu = time.process_time() - cpu
    finally:
        await server.stop()
        await responder_bus.close()
        await caller_bus.close()
    return statistics.median(latencies) * 1e6, cpu / calls * 1e6


async def measure(args: argparse.Namespace) -> None:
    print(f"event loop: {type(asyncio.get_running_loop()).__module__}")
    rows: dict[str, list[tuple[float, float]]] = {"nats-py": [], "faststream": []}
    with NatsServer() as server:
        for i in range(args.rounds):
            for kind in rows:
                rows[kind].append(await _round(server.url, kind, f"evaluate.bench{i}{kind[0]}", args.calls))
    medians = {kind: (statistics.median(r[0] for r in results), statistics.median(r[1] for r in results))
               for kind, results in rows.items()}  # fmt: skip
    for kind, results in rows.items():
        p50, cpu = medians[kind]
        print(f"{kind:<10} p50 {p50:7.0f} us  CPU {cpu:7.0f} us/request  (median of {args.rounds} rounds of "
              f"{args.calls}; rounds: {', '.join(f'{r[0]:.0f}/{r[1]:.0f}' for r in results)})")
    (a_p50, a_cpu), (b_p50, b_cpu) = medians["nats-py"], medians["faststream"]
    print(f"FastStream adds {b_p50 - a_p50:+.0f} us p50 and {b_cpu - a_cpu:+.0f} us CPU per request")
    print("load average (1, 5, 15 min): " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--loop", choices=("services", "asyncio"), default="services",
                        help="the services' event loop (uvloop's when installed), or asyncio's own")
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=event_loop_factory() if args.loop == "services" else None) as runner:
        runner.run(measure(args))


if __name__ == "__main__":
    main()
