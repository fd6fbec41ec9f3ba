"""The simulator's virtual-time loop: timers fire at once, in order, and a stuck run says so."""

import asyncio

import pytest

from pharos.sim.vloop import Deadlock, VirtualClock, VirtualTimeLoop, run_virtual


def test_an_hour_of_sleeps_takes_no_real_time_and_ends_at_the_right_virtual_time() -> None:
    async def main() -> tuple[float, list[str]]:
        loop = asyncio.get_running_loop()
        order: list[str] = []

        async def nap(name: str, seconds: float) -> None:
            await asyncio.sleep(seconds)
            order.append(name)

        await asyncio.gather(nap("long", 3600.0), nap("short", 1.5), nap("mid", 60.0))
        return loop.time(), order

    end_s, order = run_virtual(main())
    assert end_s == pytest.approx(3600.0)
    assert order == ["short", "mid", "long"]


def test_a_timeout_fires_on_virtual_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(5.0):
                await asyncio.Event().wait()
        return loop.time()

    assert run_virtual(main()) == pytest.approx(5.0)


def test_a_run_where_nothing_can_ever_happen_raises_deadlock() -> None:
    async def main() -> None:
        await asyncio.Event().wait()

    with pytest.raises(Deadlock):
        run_virtual(main())


def test_the_virtual_clock_reads_the_loops_time() -> None:
    loop = VirtualTimeLoop()
    try:
        clock = VirtualClock(loop, wall_start_s=1000.0)
        loop.run_until_complete(asyncio.sleep(7.0))
        assert clock.now() == pytest.approx(7.0)
        assert clock.time() == pytest.approx(1007.0)
    finally:
        loop.close()
