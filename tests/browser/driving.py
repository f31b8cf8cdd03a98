"""Driving headless Chromium (Debian's ``chromium``) through the system chromedriver for the page
tests: the browser and screenshot fixtures, and helpers that fill, submit and read pages with
bounded waits.

Nothing is downloaded: ``make setup`` installs chromium and chromium-driver with apt when they are
missing; without them the tests FAIL, they never skip. Screenshots go to $LONGSTEP_SCREENSHOTS when
set (docs/images is made that way), else to tmp.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WAIT = 120  # seconds: the most any step waits (a loaded machine is slow)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    target = Path(os.environ.get("LONGSTEP_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    target.mkdir(parents=True, exist_ok=True)
    return target


@pytest.fixture
def browser(monkeypatch):
    """A fresh headless Chromium session; Selenium Manager (which downloads drivers) must not run."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common import selenium_manager

    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    assert not missing and shutil.which("chromium"), (
        f"{', '.join(missing) or 'chromium'} missing: the browser tests need Debian's chromium and chromium-driver "
        "(make setup installs them: apt-get install -y chromium chromium-driver)"
    )

    def no_download(*args, **kwargs):
        raise AssertionError("Selenium Manager was asked for a driver: nothing may be downloaded")

    monkeypatch.setattr(selenium_manager.SeleniumManager, "binary_paths", no_download)
    sessions = []

    def start():
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,1300"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        driver.set_page_load_timeout(30)
        sessions.append(driver)
        return driver

    yield start
    for driver in sessions:
        driver.quit()


def _status(url: str, agent: str = "test") -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": agent}), timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def _text(driver, css: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css).text


def _fill(driver, css: str, value: str) -> None:
    from selenium.webdriver.common.by import By

    field = driver.find_element(By.CSS_SELECTOR, css)
    field.clear()
    field.send_keys(value)


def _submit(driver, css: str) -> None:
    """Click a submit button and wait (bounded) until the answer's page has replaced this one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, css).click()
    WebDriverWait(driver, WAIT).until(lambda _: _replaced(page))


def _replaced(element) -> bool:
    """Whether ``element``'s document has been replaced by a navigation. chromedriver says so with a
    stale-element error, or (when the navigation lands mid-call, seen under load) with "Node with
    given id does not belong to the document"; any other error is not a navigation and is raised."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False
