"""``/test``: the test controls (``--test-controls``): move the broker's clock, run a check round
now, inject faults. With the controls off, every route answers 403 ``TEST_CONTROLS_OFF`` and
changes nothing."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from broker.controls import TestControls
from broker.errors import TestControlsOff
from broker.http_api.context import AdminContext, admin_context

router = APIRouter(prefix="/test", tags=["test controls"])


def controls(context: AdminContext = Depends(admin_context)) -> TestControls:  # noqa: B008
    if context.controls is None:
        raise TestControlsOff("the test controls are off: start the broker with --test-controls")
    return context.controls


class ClockIn(BaseModel):
    advance_seconds: float = Field(ge=0, le=100 * 365 * 86400)


class ClockOut(BaseModel):
    now: float = Field(description="broker time, seconds since the epoch")
    offset: float = Field(description="seconds the broker's clock is ahead of the system's")


class CheckNowOut(BaseModel):
    checked: int
    discarded: int
    waiting: int
    orphaned: int
    undelivered: int
    answered: int = Field(description="checks of this round answered (and the answers committed)")
    unanswered: int = Field(description="checks of this round still unanswered when the wait ended")


class FaultsModel(BaseModel):
    drop_end_transactions: int = Field(default=0, ge=0, description="the next ends lost before they are recorded")
    lose_half_acks: int = Field(default=0, ge=0, description="the next half messages stored, their acks lost")
    drop_txn_sends: int = Field(
        default=0, ge=0, description="the next sends of Kafka-model transactions lost before they are stored"
    )
    crash_in_commits: int = Field(
        default=0, ge=0, description="the next commits of Kafka-model transactions stored, then the broker SIGKILLed"
    )
    delay_checks: float = Field(default=0.0, ge=0, le=3600, description="seconds each check round waits first")


@router.post("/clock", response_model=ClockOut)
async def advance_clock(move: ClockIn, given: TestControls = Depends(controls)) -> ClockOut:  # noqa: B008
    """Move the broker's clock forward (ages, timeouts, retention and delayed messages follow it);
    the delayed messages due by then are delivered before it answers."""
    now = await given.advance(move.advance_seconds)
    return ClockOut(now=now, offset=given.clock.offset)


@router.post("/checks", response_model=CheckNowOut)
async def check_now(
    given: TestControls = Depends(controls),  # noqa: B008
    context: AdminContext = Depends(admin_context),  # noqa: B008
) -> CheckNowOut:
    """Run a check round now; answer once its checks are answered or ``--check-timeout`` passed."""
    report = await given.check_now(context.settings.check_timeout)
    counts = report.round
    return CheckNowOut(
        checked=counts.checked, discarded=counts.discarded, waiting=counts.waiting, orphaned=counts.orphaned,
        undelivered=counts.undelivered, answered=report.answered, unanswered=report.unanswered,
    )  # fmt: skip


@router.get("/faults", response_model=FaultsModel)
def faults(given: TestControls = Depends(controls)) -> FaultsModel:  # noqa: B008
    return FaultsModel(**vars(given.faults))


@router.put("/faults", response_model=FaultsModel)
def set_faults(wanted: FaultsModel, given: TestControls = Depends(controls)) -> FaultsModel:  # noqa: B008
    """Replace the faults to inject (fields left out are cleared)."""
    given.faults.set(**wanted.model_dump())
    return wanted
