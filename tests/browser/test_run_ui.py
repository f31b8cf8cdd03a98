"""The run UI (``longstep ui``) in a real browser: headless Chromium (Debian's ``chromium``) driven by
Selenium through the system chromedriver, against the UI server in a thread on the in-process
local stack, as ``longstep ui --endpoint-url`` serves it.

One triage run is driven end to end from the page: followed live (the model's text arrives in
pieces, as ``model.delta`` events), its approvals approved from the page, a message sent (the run's
next model step records it under ``steering``), paused (the run parks: its record holds the pause
token, the next turn has not run) and resumed (it finishes). Another run is stopped from the page
(its final output says STOPPED, with the reason typed). A crashed and retried model step is shown
struck out, and what is not struck out is what the run recorded. The runs list's filters, the
escaping of run data and the phone-width layout are checked on the way.

Every wait is bounded (``WebDriverWait``). The virtual clock is held while the browser plays the
operator, so no approval times out meanwhile. Nothing is downloaded; screenshots go to
$LONGSTEP_SCREENSHOTS when set (docs/images is made that way), else to tmp.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from longstep import events as ev
from longstep import keys, steering
from longstep.events import EventLog
from longstep.humans.service import ApprovalService
from longstep.humans.table import ApprovalTable
from longstep.messages import text_of
from longstep.store import CheckpointStore
from longstep_kit.ops.steer import Steering
from longstep_kit.ops.views.inspector import RunInspector
from longstep_kit.testing import Fault, LocalStack, RunOptions, run_scenario
from longstep_kit.ui.backend import Backend
from longstep_kit.ui.server import UiServer
from tests.browser.driving import browser  # noqa: F401 - the headless Chromium fixture (no downloads)
from tests.local.conftest import Background, triage  # noqa: F401 - the scenario fixture

WAIT = 120  # seconds: the most any step below waits (a loaded machine is slow)
RUN, OTHER, CRASHED = "ui-followed", "ui-stopped", "ui-crashed"
MESSAGE = "Also check <b>BUG-103</b> while you are at it."


@pytest.fixture(scope="module")
def stack():
    with LocalStack() as local:
        yield local


@pytest.fixture(scope="module")
def ui(stack):
    ddb, sfn = stack.client("dynamodb"), stack.client("stepfunctions")
    store = CheckpointStore(stack.outputs["CheckpointTableName"], ddb)
    approvals = ApprovalTable(stack.outputs["ApprovalsTableName"], ddb)
    inspector = RunInspector(
        stack.state_machine_arn,
        stack.outputs["CheckpointTableName"],
        stack.outputs["ApprovalsTableName"],
        sfn=sfn,
        dynamodb=ddb,
        lambda_client=stack.client("lambda"),
    )
    service = ApprovalService(approvals, store, sfn, resolve_agent=lambda name: None)
    backend = Backend(inspector, Steering(store, sfn, stack.state_machine_arn, approvals, who="ui-tester"), service, status_every=0.2)
    with UiServer(backend) as server:
        yield server


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    target = Path(os.environ.get("LONGSTEP_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    target.mkdir(parents=True, exist_ok=True)
    return target


def _store(stack) -> CheckpointStore:
    return CheckpointStore(stack.outputs["CheckpointTableName"], stack.client("dynamodb"))


def _until(driver, what: str, condition):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(lambda d: condition(d), message=what)


def _all(driver, css: str):
    return driver.find_elements("css selector", css)


def _text(driver, css: str) -> str:
    """The text of the first element matching ``css`` (read in one script: the page re-renders)."""
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : '';", css)


def _fill(driver, css: str, value: str) -> None:
    field = driver.find_element("css selector", css)
    field.clear()
    field.send_keys(value)


def _click(driver, css: str) -> None:
    """Click the first enabled ``css`` (found again if the page re-rendered it meanwhile)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def clicked(d) -> bool:
        try:
            button = next((b for b in _all(d, css) if b.is_enabled()), None)
            if button is None:
                return False
            button.click()
            return True
        except StaleElementReferenceException:
            return False

    _until(driver, f"{css} clicked", clicked)


def _rows(driver) -> list[str]:
    """The run ids the runs list shows, in order."""
    return driver.execute_script("return [...document.querySelectorAll('#runs-table tbody tr')].map((r) => r.dataset.runId);")


def _status_is(driver, status: str) -> None:
    _until(driver, f"the run's status {status!r} (it is {_text(driver, '#run-status')!r})", lambda d: _text(d, "#run-status") == status)


def _approve_the_pending_one(driver, tool: str) -> None:
    _until(driver, f"a pending {tool} approval", lambda d: tool in _text(d, ".approval .head"))
    _click(driver, ".approval .approve")
    _until(driver, "the approval decided", lambda d: not _all(d, ".approval"))


def _open_run(driver, run_id: str) -> None:
    _click(driver, f'tr[data-run-id="{run_id}"] a')
    _until(driver, f"{run_id}'s page", lambda d: _text(d, "#run-id") == run_id)


def _model_card(driver, turn: int):
    return driver.find_element("css selector", f'li.model[data-step="{ev.step_name(turn)}"]:not(.superseded)')


def test_the_ui_follows_approves_messages_pauses_resumes_and_stops(stack, ui, browser, shots, triage):  # noqa: F811
    store = _store(stack)
    stack.clock.hold()  # a person is looking: no approval may time out meanwhile
    followed = Background(stack, triage, RunOptions(approve="external", run_id=RUN, timeout_seconds=300))
    other = None
    try:
        driver = browser()
        driver.get(ui.url)
        assert "token=" not in driver.current_url  # the token became a cookie; the address bar has none
        _open_run(driver, RUN)

        # Followed live: the model's text arrives, the run parks on its first approval.
        _until(driver, "turn 0's streamed text", lambda d: triage.turns[0].text in _text(d, "#timeline"))
        _until(driver, "the approval of turn 5", lambda d: "send_email, turn 5 call 0" in _text(d, ".approval .head"))
        assert "payments-oncall@example.com" in _text(driver, ".approval .args")
        driver.save_screenshot(str(shots / "run-ui-approval.png"))

        # A message, then a pause, then the approval: the run parks at its next model turn.
        _fill(driver, "#message", MESSAGE)
        _click(driver, "#send")
        _until(driver, "the message queued", lambda d: "message 0 queued" in _text(d, "#notice"))
        _until(driver, "the message in the timeline", lambda d: MESSAGE in _text(d, "#timeline"))
        assert not _all(driver, "#timeline b, #timeline img")  # run data is text, never markup
        _click(driver, "#pause")
        _until(driver, "the pause asked for", lambda d: "pauses at its next model turn" in _text(d, "#notice"))
        _approve_the_pending_one(driver, "send_email")
        _status_is(driver, "paused")
        _until(driver, "run.paused in the timeline", lambda d: "paused at turn 6" in _text(d, "#timeline"))
        assert (store.get(RUN, keys.RUN_RECORD) or {}).get(steering.PAUSE_TOKEN)  # parked on Pause's task token
        assert store.get_step(RUN, keys.model_step_key(6)) is None  # and turn 6 has not run
        driver.save_screenshot(str(shots / "run-ui-paused.png"))

        # Resumed: turn 6 takes the message, turn 7 asks again, the run finishes under our eyes.
        _click(driver, "#resume")
        _until(driver, "resumed", lambda d: "resumed where it paused" in _text(d, "#notice"))
        _approve_the_pending_one(driver, "send_email")
        _status_is(driver, "succeeded")
        _until(driver, "run.finished in the timeline", lambda d: "run finished: succeeded" in _text(d, "#timeline"))
        report = followed.result(WAIT)
        assert report["status"] == "SUCCEEDED"
        assert store.get_step(RUN, keys.model_step_key(6)).result["steering"] == [MESSAGE]
        last = len(triage.turns) - 1
        card = _model_card(driver, last)
        recorded = text_of(store.get_step(RUN, keys.model_step_key(last)).result["message"])
        assert card.find_element("css selector", ".text").get_attribute("textContent") == recorded
        assert int(card.get_attribute("data-deltas")) > 1  # it arrived in pieces, as it streamed
        approvers = [e["approver"] for e in EventLog(store).read(RUN) if e["type"] == ev.APPROVAL_DECIDED]
        assert approvers == ["ui-tester (run UI)", "ui-tester (run UI)"]
        driver.save_screenshot(str(shots / "run-ui-finished.png"))

        # Another run, stopped from the page while it waits for its approval.
        other = Background(stack, triage, RunOptions(approve="external", run_id=OTHER, timeout_seconds=300))
        driver.find_element("css selector", "#back").click()
        _fill(driver, "#f-q", OTHER)
        _open_run(driver, OTHER)
        _until(driver, "its approval of turn 5", lambda d: "turn 5 call 0" in _text(d, ".approval .head"))
        _fill(driver, "#stop-reason", "wrong incident")
        _click(driver, "#stop")
        _status_is(driver, "stopped")
        _until(driver, "run.stopped in the timeline", lambda d: "stopped at turn" in _text(d, "#timeline"))
        assert other.result(WAIT)["status"] == "SUCCEEDED"  # the execution ended cleanly, at a step boundary
        output = store.get(OTHER, keys.FINAL_RECORD)["output"]
        output = json.loads(output) if isinstance(output, str) else output
        assert (output["status"], output["stop_reason"]) == ("STOPPED", "wrong incident")
        driver.save_screenshot(str(shots / "run-ui-stopped.png"))

        # At phone width nothing is wider than the screen.
        driver.set_window_size(390, 1000)
        _until(driver, "the layout at 390 px", lambda d: d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"))
        driver.save_screenshot(str(shots / "run-ui-phone.png"))
        driver.set_window_size(1000, 1300)

        # The runs list's filters.
        driver.find_element("css selector", "#back").click()
        _until(driver, "the runs list", lambda d: _all(d, "#runs-table"))
        _click(driver, "#f-status option[value='stopped']")
        _until(driver, "only the stopped run", lambda d: _rows(d) == [OTHER])
        _click(driver, "#f-status option[value='succeeded']")
        _until(driver, "only the finished run", lambda d: _rows(d) == [RUN])
        _fill(driver, "#f-agent", "nobody")
        _until(driver, "no run of agent nobody", lambda d: "No runs match." in _text(d, "#runs"))
        _fill(driver, "#f-agent", "triage")
        _click(driver, "#f-status option[value='']")
        _until(driver, "both runs", lambda d: set(_rows(d)) == {RUN, OTHER})
        driver.save_screenshot(str(shots / "run-ui-runs.png"))
    finally:
        stack.clock.release()
        followed.thread.join(WAIT)
        if other is not None:
            other.thread.join(WAIT)


def test_a_retried_model_step_is_struck_out_and_the_rest_is_what_was_recorded(stack, ui, browser, triage):  # noqa: F811
    report = run_scenario(stack, triage, RunOptions(run_id=CRASHED, faults=[Fault("after_model", 2)]))
    assert report["status"] == "SUCCEEDED" and report["faults_injected"]
    driver = browser()
    driver.get(ui.url + f"#/run/{CRASHED}")
    _until(driver, "the whole stream", lambda d: "run finished: succeeded" in _text(d, "#timeline"))
    struck = _all(driver, f'li.model.superseded[data-step="{ev.step_name(2)}"]')
    assert struck and all("this attempt does not count" in s.get_attribute("textContent") for s in struck)
    store = _store(stack)
    for turn in range(len(triage.turns)):
        shown = _model_card(driver, turn).find_element("css selector", ".text").get_attribute("textContent")
        assert shown == text_of(store.get_step(CRASHED, keys.model_step_key(turn)).result["message"]), turn
    assert len(_all(driver, f'li.model[data-step="{ev.step_name(2)}"]:not(.superseded)')) == 1
