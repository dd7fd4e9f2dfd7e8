"""Cooperative scheduling (issue 40): a program that spins on memory only another program changes
gives way to the others, as co-resident programs on a GPU would let it; a hang is reported only
when no program can make progress."""
import threading

import pytest
import torch
import triton
import triton.language as tl

from tritonkit.check import CheckAborted, checking

ENGINES = ["sequential", "auto"]


# --- a ticket lock: program i goes when a counter says i (forward), or when program i + 1 is done ---
@triton.jit
def ticket_forward(counter, seen, out):
    pid = tl.program_id(0)
    while tl.atomic_add(counter, 0) != pid:  # LINE: forward_poll
        pass
    order = tl.load(seen)  # plain: ordered by the ticket (acquire/release on the counter)
    tl.store(out + pid, order)
    tl.store(seen, order + 1)
    tl.atomic_add(counter, 1)


@triton.jit
def ticket_reverse(flags, out, n):
    pid = tl.program_id(0)
    last = pid == n - 1
    if not last:
        while tl.atomic_add(flags + pid + 1, 0) == 0:  # LINE: reverse_poll
            pass
    after = tl.load(out + pid + 1)  # what program pid + 1 stored (out[n]: 0)
    tl.store(out + pid, after + 1)
    tl.atomic_xchg(flags + pid, 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_ticket_lock_taken_in_program_order_gives_the_expected_result(engine):
    n = 8
    counter, seen = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    out = torch.full((n,), -1, dtype=torch.int32)
    with checking(engine=engine) as s:
        ticket_forward[(n,)](counter, seen, out)
    assert s.findings == []
    assert out.tolist() == list(range(n)) and seen.item() == n and counter.item() == n


@pytest.mark.parametrize("engine", ENGINES)
def test_programs_waiting_for_later_ones_give_way_until_the_last_one_has_run(engine):
    """Program i waits for program i + 1: every program but the last is suspended before any ends."""
    n = 8
    flags, out = torch.zeros(n, dtype=torch.int32), torch.zeros(n + 1, dtype=torch.int32)
    with checking(engine=engine) as s:
        ticket_reverse[(n,)](flags, out, n)
    assert s.findings == [], [(f.kind, f.message) for f in s.findings]
    assert out.tolist() == [n - i for i in range(n)] + [0] and flags.tolist() == [1] * n
    (rec,) = s.launches
    assert rec.status == "ok" and rec.programs == n and rec.engine == "sequential"
    if engine == "auto":  # the batch that spins falls back, and the record says why
        assert rec.fallback and ("spin" in rec.fallback or "atomic" in rec.fallback)


@pytest.mark.parametrize("stall_polls", [0, 2])
def test_programs_give_way_whatever_the_stall_limit(stall_polls):
    """0: never stopped as stalled; 2: a program gives way at its second identical poll, before that."""
    n = 5
    flags, out = torch.zeros(n, dtype=torch.int32), torch.zeros(n + 1, dtype=torch.int32)
    with checking(engine="sequential", stall_polls=stall_polls) as s:
        ticket_reverse[(n,)](flags, out, n)
    assert s.findings == [] and out.tolist() == [n - i for i in range(n)] + [0]


# --- a mutex (atomic_cas / atomic_xchg) around a read-modify-write of a shared total ------------------
@triton.jit
def mutex_sum(lock, total, x, n):
    pid = tl.program_id(0)
    if pid == n - 1:  # the lock starts taken (1): the last program frees it
        tl.atomic_xchg(lock, 0)
    while tl.atomic_cas(lock, 0, 1) == 1:  # LINE: mutex_poll
        pass
    tl.store(total, tl.load(total) + tl.load(x + pid))
    tl.atomic_xchg(lock, 0)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("taken", [False, True])
def test_a_mutex_serializes_a_shared_read_modify_write_with_no_race(engine, taken):
    n = 12
    x = torch.arange(1, n + 1, dtype=torch.int32)
    lock, total = torch.full((1,), int(taken), dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    with checking(engine=engine) as s:
        mutex_sum[(n,)](lock, total, x, n)
    assert s.findings == [], [(f.kind, f.message) for f in s.findings]
    assert total.item() == n * (n + 1) // 2 and lock.item() == 0


@triton.jit
def mutex_waiting_inside(lock, flag, total, x, n):
    pid = tl.program_id(0)
    if pid == n - 1:
        tl.atomic_xchg(flag, 1)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    if pid == 0:  # holds the lock while it waits for the last program: every other one waits for it
        while tl.atomic_add(flag, 0) == 0:
            pass
    tl.store(total, tl.load(total) + tl.load(x + pid))
    tl.atomic_xchg(lock, 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_program_suspended_while_it_holds_a_lock_resumes_when_its_flag_is_set(engine):
    n = 6
    x = torch.arange(1, n + 1, dtype=torch.int32)
    lock, flag, total = (torch.zeros(1, dtype=torch.int32) for _ in range(3))
    with checking(engine=engine) as s:
        mutex_waiting_inside[(n,)](lock, flag, total, x, n)
    assert s.findings == [], [(f.kind, f.message) for f in s.findings]
    assert total.item() == n * (n + 1) // 2 and lock.item() == 0


@triton.jit
def flag_hand_off(flag, out, ATOMIC_LOAD: tl.constexpr, PLAIN_SET: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        if ATOMIC_LOAD:
            while tl.atomic_load(flag) == 0:  # LINE: atomic_load_poll
                pass
        else:
            while tl.load(flag, volatile=True) == 0:  # LINE: volatile_poll
                pass
        tl.store(out, 1)
    else:
        if PLAIN_SET:
            tl.store(flag, 1)  # LINE: plain_set
        else:
            tl.atomic_xchg(flag, 1)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("atomic_load", [False, pytest.param(True, marks=pytest.mark.skipif(
    not hasattr(tl, "atomic_load"), reason=f"tl.atomic_load is new in Triton 3.9 (this is {triton.__version__})"))])
@pytest.mark.parametrize("plain_set", [False, True])
def test_a_volatile_poll_of_a_flag_set_by_an_atomic_is_no_race_and_by_a_plain_store_is(engine, atomic_load, plain_set,
                                                                                        line_of):
    flag, out = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    with checking(engine=engine) as s:
        flag_hand_off[(2,)](flag, out, ATOMIC_LOAD=atomic_load, PLAIN_SET=plain_set)
    assert out.item() == 1 and flag.item() == 1
    if not plain_set:
        assert s.findings == [], [(f.kind, f.message) for f in s.findings]
        return
    (f,) = s.findings
    poll = line_of(flag_hand_off, "atomic_load_poll" if atomic_load else "volatile_poll")
    assert (f.kind, f.reason, f.line, f.program_ids) == ("data_race", "write_read", poll, [[0]])
    assert f.other["line"] == line_of(flag_hand_off, "plain_set") and f.other["program_ids"] == [[1]]


# --- what a suspended program does is still checked, and named by the right program -----------------
@triton.jit
def relaxed_hand_off(flags, out, n):
    pid = tl.program_id(0)
    if pid < n - 1:
        while tl.atomic_add(flags + pid + 1, 0, sem="relaxed") == 0:
            pass
    after = tl.load(out + pid + 1)  # LINE: relaxed_load
    tl.store(out + pid, after + 1)  # LINE: relaxed_store
    tl.atomic_xchg(flags + pid, 1, sem="relaxed")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_hand_off_with_relaxed_atomics_is_still_a_race_between_the_right_programs(engine, line_of):
    n = 4
    flags, out = torch.zeros(n, dtype=torch.int32), torch.zeros(n + 1, dtype=torch.int32)
    with checking(engine=engine) as s:
        relaxed_hand_off[(n,)](flags, out, n)
    assert out.tolist() == [n - i for i in range(n)] + [0]
    (f,) = [f for f in s.findings if f.kind == "data_race"]
    # program i loads what program i + 1 stored, with nothing ordering them
    assert (f.line, f.reason) == (line_of(relaxed_hand_off, "relaxed_load"), "write_read")
    assert sorted(f.program_ids) == [[0], [1], [2]]
    assert f.other["line"] == line_of(relaxed_hand_off, "relaxed_store")
    assert sorted(f.other["program_ids"]) == [[1], [2], [3]]


@triton.jit
def waits_then_overruns(flag, out, n, B: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        while tl.atomic_add(flag, 0) == 0:
            pass
    offs = pid * B + tl.arange(0, B)
    tl.store(out + offs + pid, pid + 1, mask=offs < n)  # LINE: overrun  (program 1: one past the end)
    if pid == 1:
        tl.atomic_xchg(flag, 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_findings_of_programs_that_run_while_another_is_suspended_name_them(engine, line_of):
    out = torch.zeros(16, dtype=torch.int32)
    with checking(engine=engine) as s:
        waits_then_overruns[(2,)](torch.zeros(1, dtype=torch.int32), out[:8], 8, B=4)
    (f,) = s.findings
    assert (f.kind, f.line, f.program_ids) == ("out_of_bounds", line_of(waits_then_overruns, "overrun"), [[1]])
    assert out[:8].tolist() == [1] * 4 + [0] + [2] * 3 and out[8:].tolist() == [0] * 8


@pytest.mark.parametrize("engine", ENGINES)
def test_stop_on_first_in_a_program_run_while_another_is_suspended_stops_the_launch(engine, line_of):
    out = torch.zeros(8, dtype=torch.int32)
    with pytest.raises(CheckAborted):
        with checking(engine=engine, stop_on_first=True) as s:
            waits_then_overruns[(2,)](torch.zeros(1, dtype=torch.int32), out, 8, B=4)
    (f,) = s.findings
    assert (f.kind, f.line, f.program_ids) == ("out_of_bounds", line_of(waits_then_overruns, "overrun"), [[1]])
    assert s.launches[0].status == "aborted"


@triton.jit
def waits_for_a_program_that_loops(flag, spins):
    pid = tl.program_id(0)
    if pid == 0:
        while tl.atomic_add(flag, 0) == 0:
            pass
    else:
        while tl.atomic_add(spins, 1) >= 0:  # LINE: endless  (writes memory: never a stall)
            pass
        tl.atomic_xchg(flag, 1)


def test_the_time_limit_stops_the_program_that_runs_not_the_one_that_waits(line_of):
    with pytest.raises(CheckAborted, match="timed out"):
        with checking(engine="sequential", timeout=1.0) as s:
            waits_for_a_program_that_loops[(2,)](torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32))
    (f,) = s.findings
    assert (f.kind, f.reason, f.program_ids) == ("timeout", "time_limit", [[1]])
    endless = line_of(waits_for_a_program_that_loops, "endless")
    assert f.line in (endless, endless + 1)
    assert s.launches[0].status == "aborted"


@triton.jit
def waits_then_fails(flag, x):
    pid = tl.program_id(0)
    if pid == 0:
        while tl.atomic_add(flag, 0) == 0:
            pass
    else:
        tl.atomic_xchg(flag, 1)
        tl.store(x, tl.load(x + 0.5))  # LINE: bad_offset


@pytest.mark.parametrize("engine", ENGINES)
def test_an_exception_in_a_program_run_while_another_is_suspended_is_its_finding(engine, line_of):
    with pytest.raises(CheckAborted, match="could not run"):
        with checking(engine=engine) as s:
            waits_then_fails[(2,)](torch.zeros(1, dtype=torch.int32), torch.zeros(4))
    (f,) = s.findings
    assert (f.kind, f.line, f.program_ids) == ("kernel_error", line_of(waits_then_fails, "bad_offset"), [[1]])
    assert not _program_threads()


def _program_threads():
    return [t for t in threading.enumerate() if t.name.startswith("tritonkit-program")]


def test_a_launch_whose_programs_never_wait_starts_no_thread(monkeypatch):
    started = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self.name)
        real_start(self)
    monkeypatch.setattr(threading.Thread, "start", start)
    n = 6
    counter, seen, out = (torch.zeros(k, dtype=torch.int32) for k in (1, 1, n))
    with checking(engine="sequential") as s:
        ticket_forward[(n,)](counter, seen, out)
    assert s.findings == [] and out.tolist() == list(range(n))
    assert not [name for name in started if name.startswith("tritonkit-program")]
    flags, out = torch.zeros(n, dtype=torch.int32), torch.zeros(n + 1, dtype=torch.int32)
    with checking(engine="sequential") as s:
        ticket_reverse[(n,)](flags, out, n)
    # every program but the last gives way: the first runs in the calling thread, the others in their own
    assert len([name for name in started if name.startswith("tritonkit-program")]) == n - 1
    assert not _program_threads()


# --- real hangs are still reported -------------------------------------------------------------------
@triton.jit
def waits_for_nobody(flag, out, VOLATILE: tl.constexpr):
    pid = tl.program_id(0)
    if VOLATILE:
        while tl.load(flag, volatile=True) == 0:  # LINE: nobody_load
            pass
    else:
        while tl.atomic_add(flag, 0) == 0:  # LINE: nobody_atomic
            pass
    tl.store(out + pid, 1)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("volatile", [False, True])
def test_a_flag_nobody_sets_is_still_a_stall_at_the_polling_line(engine, volatile, line_of):
    flag, out = torch.zeros(1, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    with pytest.raises(CheckAborted, match="stalled"):
        with checking(engine=engine, stall_polls=500) as s:
            waits_for_nobody[(4,)](flag, out, VOLATILE=volatile)
    (f,) = s.findings
    site = "nobody_load" if volatile else "nobody_atomic"
    assert (f.kind, f.reason, f.line) == ("timeout", "stalled", line_of(waits_for_nobody, site))
    assert f.program_ids == [[0]] and "500 times while nothing wrote to memory" in f.message
    assert out.tolist() == [0] * 4 and s.launches[0].status == "aborted"


@triton.jit
def waits_for_the_last(flags, n):
    pid = tl.program_id(0)
    if pid < n - 1:
        while tl.atomic_add(flags + n - 1, 0) == 0:  # LINE: last_poll
            pass
    tl.atomic_xchg(flags + pid, 1)


def test_programs_past_the_resident_bound_do_not_start_and_the_hang_says_so(monkeypatch, line_of):
    monkeypatch.setattr("tritonkit.check.engine.cooperative.MAX_RESIDENT", 4)
    flags = torch.zeros(7, dtype=torch.int32)
    with pytest.raises(CheckAborted, match="stalled"):
        with checking(engine="sequential", stall_polls=300) as s:
            waits_for_the_last[(7,)](flags, 7)
    (f,) = s.findings
    assert (f.kind, f.reason, f.line) == ("timeout", "stalled", line_of(waits_for_the_last, "last_poll"))
    assert "at most 4 programs" in f.message and "3 programs" in f.message
    # within the bound the same launch ends
    flags.zero_()
    with checking(engine="sequential") as s2:
        waits_for_the_last[(4,)](flags, 4)
    assert s2.findings == [] and flags.tolist()[:4] == [1] * 4


def test_the_time_limit_stops_a_hang_before_the_stall_limit_and_ends_every_program(line_of):
    with pytest.raises(CheckAborted, match="timed out"):
        with checking(engine="sequential", timeout=1.0) as s:  # 100000 polls: much longer
            waits_for_nobody[(3,)](torch.zeros(1, dtype=torch.int32), torch.zeros(3, dtype=torch.int32),
                                   VOLATILE=False)
    (f,) = s.findings
    # programs 1 and 2 gave way in their turn; program 0, the first to wait, polls on alone
    assert (f.kind, f.reason, f.program_ids) == ("timeout", "time_limit", [[0]])
    poll = line_of(waits_for_nobody, "nobody_atomic")
    assert f.line in (poll, poll + 1)
    assert not _program_threads()
