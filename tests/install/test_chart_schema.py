"""values.schema.json refuses what the hook refuses: a setting the hook would stop at start
on is refused by ``helm install`` before anything is applied, and one the hook reads is
accepted. Helm's message names the value's path (for a setting, the variable) and says what
is wanted, in the hook's words where the schema can carry them.

The schema is read here by Python's jsonschema, as Helm's validator reads it: its patterns
keep to what Go's RE2 and Python's ``re`` read alike (checked below). A few refusals go
through helm itself, for the message a user sees.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from functools import lru_cache
from typing import Any, Iterator

import jsonschema
import pytest
from hypothesis import given, strategies as st

from hooks.image_reference import EXPECTED_FORM as IMAGE_FORM
from hooks.quantity import EXPECTED_FORM as QUANTITY_FORM
from hooks.settings import AGENT_CONFIG_EXTENSIONS, GROUPS, ConfigError, Settings
from tests.chart import SCHEMA, default_values, refusal
from tests.strategies import BOUNDED
from tests.image_reference_strategies import ALPHABET as IMAGE_ALPHABET, near_references

SCHEMA_TEXT = SCHEMA.read_text(encoding="utf-8")
# Set beside a variable whose combination rule would otherwise decide for it: the limit
# equal to the request, the request the least there is, the first delay the shortest the
# hook takes, the longest delay the longest.
PARTNERS = {
    "JOB_CPU_REQUEST": lambda raw: {"JOB_CPU_LIMIT": raw},
    "JOB_CPU_LIMIT": lambda raw: {"JOB_CPU_REQUEST": "1n"},
    "JOB_MEMORY_REQUEST": lambda raw: {"JOB_MEMORY_LIMIT": raw},
    "JOB_MEMORY_LIMIT": lambda raw: {"JOB_MEMORY_REQUEST": "1n"},
    "RETRY_MAX_DELAY_SECONDS": lambda raw: {"RETRY_BASE_DELAY_SECONDS": "10"},
    "RETRY_BASE_DELAY_SECONDS": lambda raw: {"RETRY_MAX_DELAY_SECONDS": "86400"},
}
QUANTITIES = ("JOB_CPU_REQUEST", "JOB_CPU_LIMIT", "JOB_MEMORY_REQUEST", "JOB_MEMORY_LIMIT")
PATHS = ("OME_AGENT_CONFIG", "MODEL_MOUNT_PATH")


@lru_cache(maxsize=None)
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_TEXT)


@lru_cache(maxsize=None)
def setting_validator(variable: str) -> jsonschema.protocols.Validator:
    """The rule of one setting, with the definitions it refers to, built once."""
    return jsonschema.Draft202012Validator({"$defs": schema()["$defs"], **schema()["properties"]["settings"]["properties"][variable]})


def schema_accepts(variable: str, value: Any) -> bool:
    """Whether the schema accepts ``value`` as the setting ``variable``."""
    return setting_validator(variable).is_valid(value)


def hook_reads(variable: str, raw: str) -> Any | None:
    """What the hook makes of ``variable=raw`` at start, or None when it stops on it."""
    try:
        partners = PARTNERS[variable](raw) if variable in PARTNERS else {}
        settings = Settings.from_env({**partners, variable: raw})
    except ConfigError:
        return None
    for group in fields(settings):
        for item in fields(getattr(settings, group.name)):
            if item.metadata["variable"].name == variable:
                return getattr(getattr(settings, group.name), item.name)
    raise AssertionError(f"the hook reads no {variable}")


def assert_refuses_what_the_hook_refuses(variable: str, raw: str, value: Any = None) -> None:
    """Refused by the hook, refused by the schema; read by the hook, what it read is accepted
    by the schema (a path as the hook normalises it, a text without its surrounding blanks)."""
    read = hook_reads(variable, raw)
    if read is None:
        assert not schema_accepts(variable, raw if value is None else value), f"{variable}={raw!r}"
    else:
        assert schema_accepts(variable, read), f"{variable}={raw!r} read as {read!r}"


def patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern":
                yield value
            else:
                yield from patterns(value)
    elif isinstance(node, list):
        for item in node:
            yield from patterns(item)


WHOLE_NUMBERS = [name for name, rule in json.loads(SCHEMA_TEXT)["properties"]["settings"]["properties"].items()
                 if "integer" in rule.get("type", [])]


def test_the_default_values_are_valid() -> None:
    jsonschema.Draft202012Validator(schema()).validate(default_values())


def test_patterns_read_alike_in_gos_re2_and_pythons_re() -> None:
    """No class that Unicode widens in Python (\\d \\w \\s \\b), no lookaround RE2 lacks, and every
    pattern anchored at both ends or meant as a search."""
    found = list(patterns(schema()))
    assert len(found) > 20
    for pattern in found:
        assert not re.search(r"\\[dwsbDWSB]|\(\?[=!<]", pattern), pattern
        re.compile(pattern)


def test_every_setting_of_the_hook_has_a_rule_in_the_schema() -> None:
    assert set(schema()["properties"]["settings"]["properties"]) == set(default_values()["settings"])
    assert schema()["properties"]["settings"]["additionalProperties"] is False, "a misspelt variable is refused"


@pytest.mark.parametrize("variable", WHOLE_NUMBERS)
def test_a_whole_number_setting_has_the_hooks_bounds(variable: str) -> None:
    rule = schema()["properties"]["settings"]["properties"][variable]
    low, high = rule["minimum"], rule["maximum"]
    for value in (low - 1, low, high, high + 1, -1, 0):
        assert_refuses_what_the_hook_refuses(variable, str(value), value)
    assert not schema_accepts(variable, "30"), "a number as a string is refused: the type says what is wanted"


def test_the_hooks_own_defaults_and_null_are_accepted_for_every_setting() -> None:
    for group in GROUPS:
        for item in fields(group):
            name = item.metadata["variable"].name
            if name not in default_values()["settings"]:
                continue
            default = item.default if item.default not in ("", None) else default_values()["settings"][name]
            assert schema_accepts(name, default), f"the hook's default of {name} is refused"
            assert schema_accepts(name, None), f"{name}: null keeps the hook's default"


@BOUNDED
@given(st.sampled_from(QUANTITIES), st.one_of(st.text("0123456789.+-eEkKMmGiun", max_size=8), st.sampled_from(
    ["500m", "0", "0.0Mi", "-1", "1e2147483647", "1e2147483648", "1e-2147483648", "1e-2147483649", "1e0002147483647", ".5", "5.", "0.9n"])))
def test_a_quantity_setting_is_refused_exactly_when_the_hook_refuses_it(variable: str, text: str) -> None:
    assert_refuses_what_the_hook_refuses(variable, text)


@BOUNDED
@given(st.one_of(near_references(), st.text(IMAGE_ALPHABET, max_size=24)))
def test_the_agent_image_is_refused_exactly_when_the_hook_refuses_it(text: str) -> None:
    assert_refuses_what_the_hook_refuses("OME_AGENT_IMAGE", text)


@BOUNDED
@given(st.sampled_from(PATHS), st.one_of(st.text("/.:tmpa", max_size=10), st.sampled_from(["/", "/tmp", "//tmp/x", "/./tmp", "/tmpx/a.yaml", "/a/../b", "/a:b", "a.yaml", "/etc/a.yml", "/x.yaml/"])))
def test_a_path_setting_is_refused_exactly_when_the_hook_refuses_it(variable: str, text: str) -> None:
    assert_refuses_what_the_hook_refuses(variable, text)


@pytest.mark.parametrize("extension", AGENT_CONFIG_EXTENSIONS)
def test_every_extension_the_agent_reads_is_accepted_for_its_configuration(extension: str) -> None:
    assert_refuses_what_the_hook_refuses("OME_AGENT_CONFIG", f"/etc/ome-agent{extension}")
    assert_refuses_what_the_hook_refuses("OME_AGENT_CONFIG", f"/etc/ome-agent{extension}.txt")


def test_the_schema_says_what_is_wanted_in_the_hooks_words() -> None:
    for words in (IMAGE_FORM, QUANTITY_FORM, ", ".join(AGENT_CONFIG_EXTENSIONS), "the Job's scratch volume"):
        assert words in SCHEMA_TEXT


@pytest.mark.helm
def test_helm_refuses_bad_values_naming_each_and_saying_what_is_wanted() -> None:
    message = refusal((
        ("settings.JOB_ACTIVE_DEADLINE_SECONDS", -1),
        ("settings.OME_AGENT_IMAGE", "ghcr.io/Moirai/ome-agent:v1:v2"),
        ("settings.JOB_MEMORY_LIMIT", "512MB"),
        ("image.tag", ".latest"),
        ("metacontroller.serviceAccount", "Metacontroller_SA"),
        ("metacontroller.namespace", "meta.controller"),
    ))
    assert "at '/settings/JOB_ACTIVE_DEADLINE_SECONDS': minimum: got -1, want 30" in message
    assert f"at '/settings/OME_AGENT_IMAGE': value must be 'an image reference, {IMAGE_FORM}" in message
    assert f"at '/settings/JOB_MEMORY_LIMIT': value must be 'a Kubernetes quantity: {QUANTITY_FORM}, such as 500m or 512Mi'" in message
    assert "at '/image/tag': value must be 'empty (the chart\\'s appVersion), or 1 to 128 letters" in message
    assert "at '/metacontroller/serviceAccount': value must be 'empty, or a lowercase RFC 1123 subdomain" in message
    assert "at '/metacontroller/namespace': value must be 'a lowercase RFC 1123 label" in message
