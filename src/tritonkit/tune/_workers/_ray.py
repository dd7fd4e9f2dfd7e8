"""The Ray engine: one Ray actor per GPU of a Ray cluster, behind the same :class:`~._pool.Engine`
interface as the local engine, so the pool, its queue, its fault handling and the ledger are the
same. Ray is an optional dependency (``pip install 'tritonkit[cluster]'``).

Connecting: to the cluster at ``address`` or ``$RAY_ADDRESS`` where one is given; to the Ray this
process already started (``ray.init`` before the engine is made); else a local Ray is started,
and shut down when the engine closes.

Placement: each actor asks for ``num_gpus=1`` (and no CPU: the GPUs decide how many fit), so Ray
places it on a GPU and sets its ``CUDA_VISIBLE_DEVICES``. With ``gpu_type``, actors go only to
nodes of that Ray accelerator type (``H100``, ``A100``, ...: the ``accelerator_type:<T>`` resource
Ray gives GPU nodes). Each actor reports its device's name (NVML), so a sweep on a cluster of
several GPU types tunes each type separately (:func:`~._sweep.sweep`). Where the cluster has no
GPU (replays on a CPU machine, the tests), actors ask for one unit of the custom resource
:data:`FAKE_GPU` instead; a local Ray started here without a GPU declares one per worker, and a
CPU cluster can declare them (``ray start --resources '{"tritonkit_gpu": 4}'``).

Messages (:mod:`._protocol`) become actor calls; what a call returns is the worker's reply:

* ``key``: the job is put in Ray's object store once per key (``ray.put``), and each actor that
  gets work of the key is sent its reference (inside a list, so that Ray does not resolve it in the
  call): the actor fetches it (once per node, then from the node's shared memory) when it builds
  the key's runner. A config's call carries only the item, the key's id and the point.
* ``run``: two calls, ``prepare`` (the key's runner is built: its reply is ``begin``) and
  ``measure`` (``done``, ``error`` or ``poisoned``). A synchronous actor runs calls from one caller
  in the order they were sent, so ``begin`` comes before the measurement starts, and a death
  after it blames the config, as with the local engine.
* deaths: every actor holds one ``watch`` call, in a concurrency group of its own, that returns
  only when the actor is stopped; Ray fails it the moment the actor dies (``ray.kill``, its
  process killed, its node gone), so an idle actor's death is noticed at once, like a busy one's.
  Actors are never restarted by Ray (``max_restarts=0``): the pool starts a replacement.

Journaling: actors on the driver's node write the driver's cache directory, so they journal their
own measurements (as local workers do); results of actors on other nodes are journaled by the
driver as they arrive (:meth:`RayEngine.writes_ledger`).
"""
from __future__ import annotations

import collections
import os
import re
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

from .._cache._journal import alive, proc_start_time, this_host
from .._runner import ContextPoisoned
from ._pool import Engine
from ._protocol import WorkerState, device_name, worker_info

#: the custom resource an actor asks for where the cluster has no GPU (replays, tests).
FAKE_GPU = "tritonkit_gpu"
#: longest wait of one ``ray.wait`` call: how soon :meth:`RayEngine.wake` is noticed (seconds).
_SLICE_S = 0.002


def import_ray():
    """Import Ray.

    Raises:
        MissingDependency: Ray is not installed (the message says ``pip install 'tritonkit[cluster]'``).
    """
    from ..._imports import MissingDependency
    try:
        import ray
    except ImportError as e:
        raise MissingDependency(f"the ray engine needs Ray, which is not installed: pip install 'tritonkit[cluster]' "
                                f"(or pip install 'ray>=2.9') ({e})") from e
    return ray


class _RefJob:
    """A key's job as an actor holds it: a reference into Ray's object store, fetched when the
    key's runner is built (so fetching the arguments counts as loading the key)."""

    def __init__(self, ref: Any):
        self.ref = ref

    def runner(self):
        import ray
        return ray.get(self.ref).runner()


class RayWorker:
    """The actor of one worker slot (made a Ray actor class by :class:`RayEngine`): the same
    :class:`~._protocol.WorkerState` as a local worker, driven by calls instead of a pipe.

    Args:
        slot: the slot's index (its label in the ledger).
        device: the device name to report (None: NVML's name of its GPU, ``"cpu"`` without one).
    """

    def __init__(self, slot: int, device: Optional[str] = None):
        import ray
        ctx = ray.get_runtime_context()
        ids = [str(i) for i in (ctx.get_accelerator_ids().get("GPU", []) if hasattr(ctx, "get_accelerator_ids")
                                else ray.get_gpu_ids())]
        self.gpu = ",".join(ids)
        self.slot, self.device = slot, device
        self.state = WorkerState(label=f"ray slot {slot}, pid {os.getpid()}")
        self.stopped = threading.Event()
        self.poisoned = False
        self.failed: set = set()

    def hello(self) -> Tuple:
        """``("hello", info)``: pid, host, gpu (``<host>:<CUDA_VISIBLE_DEVICES>``, or ``<host>:fake<slot>``),
        device, the process's start time and the Ray node's id."""
        import ray
        gpu = self.gpu.split(",")[0]
        node = ray.get_runtime_context().get_node_id()
        info = worker_info(gpu, self.device or (device_name(gpu) if gpu else _node_type(node)))
        info["gpu"] = f"{info['host']}:{self.gpu or f'fake{self.slot}'}"
        info["start"] = proc_start_time(os.getpid())
        info["node"] = node
        return ("hello", info)

    def open(self, key_id: int, box: List[Any], journal: Any) -> None:
        """Keep the key's job (``box``: its object reference, not yet fetched) and where to journal."""
        self.state.open(key_id, _RefJob(box[0]), journal)

    def forget(self, key_id: int) -> None:
        """Drop the key's job and runner (its arguments are freed)."""
        self.state.forget(key_id)

    def prepare(self, item_id: int, key_id: int) -> Optional[Tuple]:
        """Build the key's runner (fetching its job): ``("begin", item_id)``, or ``("error", ...)``
        / ``("poisoned", ...)``; None once the actor's CUDA context is broken."""
        if self.poisoned:
            return None
        try:
            self.state.prepare(key_id)
        except ContextPoisoned as e:
            self.poisoned = True
            return ("poisoned", item_id, e.error)
        except Exception:
            self.failed.add(item_id)
            return ("error", item_id, traceback.format_exc())
        return ("begin", item_id)

    def measure(self, item_id: int, key_id: int, point: Dict[str, Any]) -> Optional[Tuple]:
        """Measure one config: ``("done", item_id, trial, journaled)``, ``("error", item_id, text)``
        or ``("poisoned", item_id, text)``; None where its ``prepare`` failed or the context is broken."""
        if self.poisoned or item_id in self.failed:
            self.failed.discard(item_id)
            return None
        try:
            trial, journaled = self.state.measure(key_id, point)
        except ContextPoisoned as e:
            self.poisoned = True
            return ("poisoned", item_id, e.error)
        except Exception:
            return ("error", item_id, traceback.format_exc())
        return ("done", item_id, trial, journaled)

    def stop(self) -> None:
        """Let the ``watch`` call return: the actor is done (called after its last measurement)."""
        self.stopped.set()

    def watch(self) -> None:
        """Return when the actor is stopped (its own concurrency group: never waits for a measurement)."""
        self.stopped.wait()


@dataclass
class _Call:
    ref: Any
    item: Optional[int] = None


@dataclass
class RayHandle:
    """The driver's handle of one actor: its pending calls in the order they were sent, its
    ``watch`` call, and what its ``hello`` said (pid, node)."""

    slot: int
    actor: Any
    watch: Any
    calls: Deque[_Call] = field(default_factory=collections.deque)
    pid: Optional[int] = None
    node: Optional[str] = None
    host: Optional[str] = None
    start: Optional[int] = None
    dead: bool = False


class RayEngine(Engine):
    """Ray actors, one per GPU of a Ray cluster (see the module).

    Args:
        workers: how many actors (default: one per GPU of the cluster, of ``gpu_type`` where given;
            without GPUs, one per :data:`FAKE_GPU`; a local Ray started here without a GPU: 1).
        address: the cluster (``ray://...`` or ``host:port``); default ``$RAY_ADDRESS``, else the
            Ray this process started, else a new local Ray.
        gpu_type: place actors only on nodes of this Ray accelerator type (``"H100"``, ``"A100"``:
            Ray's ``accelerator_type:<T>`` node resource).
        device_name: the device name actors report (default: NVML's name of their GPU; without
            one, replays on a CPU cluster, the accelerator type of their node, else ``"cpu"``).
        env: more environment variables for the actors (``TRITON_INTERPRET=1``).
        runtime_env: a Ray runtime environment for the actors (``{"working_dir": "."}`` ships the
            sweep's files to nodes that lack them). A local Ray started here needs none: its
            processes inherit this process's environment, with ``PYTHONPATH`` set to its
            ``sys.path`` (:func:`start_local_ray`), so actors import what the driver imports.
            With a runtime environment (or ``env``) and a Ray this process had already started,
            each actor gets it, and takes about two seconds more to start.
        worker_ledgers: let actors on the driver's node journal their own measurements (False:
            the driver journals every measurement as it arrives).
        init_options: more keyword arguments for ``ray.init`` where a local Ray is started here
            (``object_store_memory``, ``num_cpus``, ...).

    Raises:
        MissingDependency: Ray is not installed.
        ValueError: ``workers`` is below 1 or above the GPUs the cluster has (of ``gpu_type``), no
            node has ``gpu_type``, or the cluster has neither GPUs nor :data:`FAKE_GPU`.
        ConnectionError: the cluster at ``address`` cannot be reached (from ``ray.init``).
    """

    name = "ray"
    shared_filesystem = False

    def __init__(self, workers: Optional[int] = None, address: Optional[str] = None, gpu_type: Optional[str] = None,
                 device_name: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                 runtime_env: Optional[Mapping[str, Any]] = None, worker_ledgers: bool = True,
                 init_options: Optional[Mapping[str, Any]] = None):
        ray = import_ray()
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self._ray = ray
        self._owns = False
        address = address or os.environ.get("RAY_ADDRESS") or None
        actor_env: Optional[Dict[str, Any]] = None
        if not ray.is_initialized():
            options = {"include_dashboard": False, **dict(init_options or {})}
            if address:
                if env or runtime_env:
                    options["runtime_env"] = _runtime_env(runtime_env, env)
                ray.init(address=address, **options)
            else:
                start_local_ray(workers=workers, gpu_type=gpu_type, env=env, runtime_env=runtime_env, **options)
                self._owns = True
        elif env or runtime_env:  # the caller's Ray: a runtime environment per actor (slower to start)
            actor_env = _runtime_env(runtime_env, env)
        client = address is not None and address.startswith("ray://")
        self.driver_node = None if client else ray.get_runtime_context().get_node_id()
        self.worker_ledgers = worker_ledgers
        try:
            self.resource, capacity, self.gpu_type = _capacity(ray, gpu_type)
            n = workers if workers is not None else capacity
            if n > capacity:
                raise ValueError(f"{n} workers, but the Ray cluster has {capacity} {self.resource}"
                                 f"{' of type ' + str(self.gpu_type) if self.gpu_type else ''}: one actor per GPU")
        except ValueError:
            if self._owns:
                ray.shutdown()
            raise
        self.device_name = device_name
        self.workers = n
        options: Dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_task_retries": 0}
        if actor_env:
            options["runtime_env"] = actor_env
        if self.resource == "GPU":
            options["num_gpus"] = 1
        else:
            options["resources"] = {FAKE_GPU: 1}
        if self.gpu_type:
            options["accelerator_type"] = self.gpu_type
        self._actor_class = ray.remote(concurrency_groups={"watch": 1})(RayWorker).options(**options)
        self._objects: Dict[int, Any] = {}
        self._woken = threading.Event()
        self._by_pid: Dict[int, RayHandle] = {}
        #: ``ray.put`` calls made: one per key sent to any actor (the tests count them).
        self.puts = 0

    # ------------------------------------------------------------------ Engine
    def slots(self) -> List[str]:
        """One label per actor (``ray:<slot>``); the actor's ``hello`` gives its node and GPU."""
        return [f"ray:{i}" for i in range(self.workers)]

    def start(self, slot: int) -> RayHandle:
        """Create the actor of ``slot`` (Ray places it) and send it ``hello`` and ``watch``."""
        actor = self._actor_class.remote(slot, self.device_name)
        handle = RayHandle(slot, actor, watch=None)
        handle.calls.append(_Call(actor.hello.remote()))
        handle.watch = actor.watch.options(concurrency_group="watch").remote()
        return handle

    def send(self, handle: RayHandle, message: Tuple) -> None:
        """Turn a protocol message into actor calls (the job of a key is put in the object store
        once, at the first ``key`` message of that key)."""
        if handle.dead:
            return
        kind, actor = message[0], handle.actor
        if kind == "key":
            _, key_id, job, journal = message
            ref = self._objects.get(key_id)
            if ref is None:
                ref = self._objects[key_id] = self._ray.put(job)
                self.puts += 1
            actor.open.remote(key_id, [ref], journal)
        elif kind == "run":
            _, item_id, key_id, point = message
            handle.calls.append(_Call(actor.prepare.remote(item_id, key_id), item_id))
            handle.calls.append(_Call(actor.measure.remote(item_id, key_id, point), item_id))
        elif kind == "forget":
            self._objects.pop(message[1], None)
            actor.forget.remote(message[1])
        elif kind == "stop":
            actor.stop.remote()

    def wait(self, handles: Sequence[RayHandle], timeout: float) -> List[Tuple[RayHandle, Tuple]]:
        """Replies of the actors (in the order each actor's calls were sent), and
        ``("died", why)`` for those that are gone, waiting up to ``timeout`` seconds (``ray.wait``
        in slices of a few milliseconds, so that :meth:`wake` is noticed)."""
        ray = self._ray
        refs = [c.ref for h in handles for c in h.calls] + [h.watch for h in handles]
        deadline = time.monotonic() + timeout
        while not self._woken.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not refs:
                self._woken.wait(min(left, 0.05))
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=min(left, _SLICE_S))
            if ready:
                break
        self._woken.clear()
        if not refs:
            return []
        ready = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
        events: List[Tuple[RayHandle, Tuple]] = []
        for h in handles:
            events += self._collect(h, ready)
        return events

    def wake(self) -> None:
        """Make a :meth:`wait` in progress return."""
        self._woken.set()

    def close(self, handles: Sequence[RayHandle], timeout: float) -> None:
        """Ask every actor to stop after what it was sent, wait up to ``timeout`` seconds, kill
        them, and shut Ray down where this engine started it."""
        ray = self._ray
        live = [h for h in handles if not h.dead and h.pid is not None]  # up: not waiting for a GPU
        for h in live:
            self.send(h, ("stop",))
        if live:
            ray.wait([h.watch for h in live], num_returns=len(live), timeout=timeout)
        for h in handles:
            h.dead = True
            try:
                ray.kill(h.actor, no_restart=True)
            except Exception:  # already gone, or Ray is shutting down
                pass
        # the processes of this node's actors are gone before close returns, so their ledgers can
        # be merged (as a local worker's, once joined)
        here = [h for h in handles if h.pid is not None and h.host == this_host()]
        deadline = time.monotonic() + 10.0
        while any(alive(h.pid, h.start) for h in here) and time.monotonic() < deadline:
            time.sleep(0.01)
        self._objects.clear()
        self._by_pid.clear()
        if self._owns and ray.is_initialized():
            ray.shutdown()
            self._owns = False

    def writes_ledger(self, handle: RayHandle) -> bool:
        """Whether the actor journals its own measurements: it runs on the driver's node (so it
        writes the driver's cache directory) and ``worker_ledgers`` is on."""
        return self.worker_ledgers and self.driver_node is not None and handle.node == self.driver_node \
            and handle.host == this_host()

    # ------------------------------------------------------------------ tests and benchmarks
    def kill(self, pid: int) -> bool:
        """``ray.kill`` the actor whose process is ``pid`` (the fault tests); False if none is."""
        h = self._by_pid.get(pid)
        if h is None:
            return False
        self._ray.kill(h.actor, no_restart=True)
        return True

    # ------------------------------------------------------------------ replies
    def _collect(self, h: RayHandle, ready: set) -> List[Tuple[RayHandle, Tuple]]:
        """The replies of ``h`` that are in, in order, and its death where the actor is gone."""
        out: List[Tuple[RayHandle, Tuple]] = []
        while h.calls and h.calls[0].ref in ready:
            call = h.calls.popleft()
            try:
                message = self._ray.get(call.ref)
            except self._ray.exceptions.RayActorError as e:
                return out + self._death(h, e)
            except self._ray.exceptions.RayError as e:  # a reply that cannot be read here
                message = ("error", call.item, f"{type(e).__name__}: {e}") if call.item is not None else None
            if message is None:
                continue
            if message[0] == "hello":
                info = message[1]
                h.pid, h.node, h.host, h.start = info.get("pid"), info.get("node"), info.get("host"), info.get("start")
                if h.pid is not None:
                    self._by_pid[h.pid] = h
            out.append((h, message))
            if message[0] == "poisoned":  # the actor must not measure again: the pool sees it die
                self._ray.kill(h.actor, no_restart=True)
        if h.watch in ready:
            try:
                self._ray.get(h.watch)
                why: Any = "the actor was stopped"
            except self._ray.exceptions.RayError as e:
                why = e
            out += self._death(h, why)
        return out

    def _death(self, h: RayHandle, why: Any) -> List[Tuple[RayHandle, Tuple]]:
        """The replies the dead actor ``h`` sent before dying (in order), then ``("died", why)``."""
        out: List[Tuple[RayHandle, Tuple]] = []
        pending = [c.ref for c in h.calls]
        if pending:  # the calls of a dead actor fail at once; those it finished have their reply
            self._ray.wait(pending, num_returns=len(pending), timeout=2.0)
        for call in list(h.calls):
            try:
                message = self._ray.get(call.ref, timeout=0.5)
            except Exception:
                break
            if message is not None:
                out.append((h, message))
        h.calls.clear()
        h.dead = True
        if h.pid is not None:
            self._by_pid.pop(h.pid, None)
        try:
            self._ray.kill(h.actor, no_restart=True)
        except Exception:
            pass
        out.append((h, ("died", death_reason(why))))
        return out


def death_reason(error: Any) -> str:
    """Why an actor died, in a few words, from Ray's error (``it was killed by ray.kill``, ``its
    worker process has died``, ``unreachable``)."""
    if isinstance(error, str):
        return error
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    if type(error).__name__ == "ActorUnavailableError":  # max_restarts=0: it does not come back
        return "the Ray actor is unreachable (its node is gone, or cut off)"
    if "creation task" in text:  # its __init__ raised: the exception is the traceback's last line
        last = [line.strip() for line in text.splitlines() if line.strip()][-1]
        return f"the Ray actor could not start: {last}"
    marker = "The actor is dead because "
    i = text.find(marker)
    if i >= 0:
        reason = text[i + len(marker):].split("\n")[0].split(". ")[0].rstrip(".")
        return f"the Ray actor died: {reason.replace('`', '')}"
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
    return f"the Ray actor died: {first}"


def _capacity(ray: Any, gpu_type: Optional[str]) -> Tuple[str, int, Optional[str]]:
    """(the resource actors ask for: ``GPU`` or :data:`FAKE_GPU`, how many the alive nodes (of
    ``gpu_type``) have, ``gpu_type`` as the cluster spells it).

    Raises:
        ValueError: no node of ``gpu_type``, or neither GPUs nor :data:`FAKE_GPU`.
    """
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if gpu_type:
        types = sorted({k.split(":", 1)[1] for n in nodes for k in n.get("Resources", {})
                        if k.startswith("accelerator_type:")})
        spelled = next((t for t in types if t == gpu_type), None) or \
            next((t for t in types if t.lower() == gpu_type.lower()), None)
        if spelled is None:
            raise ValueError(f"no node of the Ray cluster has GPUs of type {gpu_type!r}; its types: "
                             f"{', '.join(types) or 'none'}")
        gpu_type = spelled
        nodes = [n for n in nodes if n.get("Resources", {}).get(f"accelerator_type:{gpu_type}")]
    gpus = int(sum(n.get("Resources", {}).get("GPU", 0) for n in nodes))
    if gpus > 0:
        return "GPU", gpus, gpu_type
    fake = int(sum(n.get("Resources", {}).get(FAKE_GPU, 0) for n in nodes))
    if fake > 0:
        return FAKE_GPU, fake, gpu_type
    raise ValueError(f"the Ray cluster has no GPU{' of type ' + gpu_type if gpu_type else ''} (and no {FAKE_GPU} "
                     f"resource, which stands in for GPUs in replays: ray start --resources "
                     f"'{{\"{FAKE_GPU}\": 4}}')")


def _node_type(node_id: str) -> str:
    """The accelerator type Ray lists for node ``node_id`` (a CPU node standing in for GPUs of a
    type), else ``"cpu"``."""
    import ray
    for n in ray.nodes():
        if n.get("NodeID") == node_id:
            types = sorted(k.split(":", 1)[1] for k in n.get("Resources", {}) if k.startswith("accelerator_type:"))
            if types:
                return types[0]
    return "cpu"


def _local_gpus() -> List[str]:
    from ._local import visible_gpus
    return visible_gpus()


def _runtime_env(runtime_env: Optional[Mapping[str, Any]], env: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    """A runtime environment: the caller's, with ``env`` added to its ``env_vars``."""
    out = dict(runtime_env or {})
    out["env_vars"] = {**dict(out.get("env_vars") or {}), **dict(env or {})}
    return out


def _import_path() -> str:
    """This process's ``sys.path`` (its directories), then the ``PYTHONPATH`` it was started with."""
    paths = [os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)]
    old = os.environ.get("PYTHONPATH")
    return os.pathsep.join(paths + ([old] if old else []))


def start_local_ray(workers: Optional[int] = None, gpu_type: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, runtime_env: Optional[Mapping[str, Any]] = None,
                    **init_options: Any) -> Any:
    """Start a Ray on this host for this process (``ray.init(address="local")``), whose workers
    import what this process imports: Ray's processes inherit this process's environment with
    ``PYTHONPATH`` set to its ``sys.path`` and ``env`` added (no runtime environment, so actors
    start on Ray's prestarted workers: a fraction of a second instead of about two).

    Args:
        workers: where this host has no GPU, how many :data:`FAKE_GPU` to declare (default 1).
        gpu_type: where this host has no GPU, the accelerator type to declare (replays placed by type).
        env: environment variables for the actors (``TRITON_INTERPRET=1``).
        runtime_env: a Ray runtime environment for the whole job (slows actors' start).
        **init_options: more ``ray.init`` arguments (``num_cpus``, ``object_store_memory``,
            ``resources``, ``include_dashboard``: default False).

    Returns:
        The ``ray`` module.

    Raises:
        MissingDependency: Ray is not installed.
        RuntimeError: Ray is already initialised in this process (from ``ray.init``).
    """
    ray = import_ray()
    options = {"include_dashboard": False, **init_options}
    if runtime_env:
        options["runtime_env"] = dict(runtime_env)
    if "resources" not in options and not _local_gpus():
        options["resources"] = {FAKE_GPU: workers or 1, **({f"accelerator_type:{gpu_type}": 1} if gpu_type else {})}
    inherited = {"PYTHONPATH": _import_path(), **dict(env or {})}
    saved = {k: os.environ.get(k) for k in inherited}
    os.environ.update(inherited)
    try:
        ray.init(address="local", **options)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return ray


__all__ = ["RayEngine", "RayWorker", "RayHandle", "FAKE_GPU", "import_ray", "start_local_ray", "death_reason"]
