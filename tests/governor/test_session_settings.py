"""The session's settings, sans-IO: the model asked for and the asking mode, from
what real agents return in ``session/new`` (shapes seen on the wire)."""

from __future__ import annotations

from typing import Any

from acp import schema

from governor.attempt.session_choices import (
    ModelChoice,
    Setting,
    Unavailable,
    acts_alone,
    asking_settings,
    choose_model,
)


def options(*raw: dict[str, Any]) -> list[Any]:
    return list(
        schema.NewSessionResponse.model_validate(
            {"sessionId": "s", "configOptions": list(raw)}
        ).config_options
        or []
    )


def select(
    option_id: str, current: str, values: list[tuple[str, str]], **extra: Any
) -> dict[str, Any]:
    return {
        "id": option_id,
        "name": option_id.title(),
        "type": "select",
        "currentValue": current,
        "options": [{"value": v, "name": n} for v, n in values],
        **extra,
    }


CLAUDE_MODES = [
    ("default", "Default"),
    ("acceptEdits", "Accept Edits"),
    ("plan", "Plan Mode"),
    ("dontAsk", "Don't Ask"),
    ("bypassPermissions", "Bypass Permissions"),
]
CLAUDE_MODELS = [
    ("default", "Default (recommended)"),
    ("sonnet[1m]", "Sonnet (1M context)"),
    ("opus[1m]", "Opus (1M context)"),
    ("haiku", "Haiku"),
]
CLAUDE = options(
    select("mode", "default", CLAUDE_MODES, category="mode"),
    select("model", "default", CLAUDE_MODELS, category="model"),
)
COPILOT_MODE = "https://agentclientprotocol.com/protocol/session-modes#"
COPILOT = options(
    select(
        "mode",
        COPILOT_MODE + "agent",
        [(COPILOT_MODE + m, m.title()) for m in ("agent", "plan", "autopilot")],
        category="mode",
    ),
    select("allow_all", "off", [("on", "On"), ("off", "Off")]),
)
QWEN_AUTO = options(
    select(
        "mode",
        "auto",
        [
            ("plan", "Plan"),
            ("default", "Default"),
            ("auto-edit", "Auto Edit"),
            ("auto", "Auto"),
            ("yolo", "YOLO"),
        ],
        category="mode",
    )
)


def test_a_model_offered_as_a_config_option_is_set_through_it() -> None:
    choice = choose_model("haiku", CLAUDE, None, agent="Claude")
    assert choice == ModelChoice(
        Setting(
            "session/set_config_option",
            {"configId": "model", "value": "haiku"},
            "the model haiku, as asked",
        ),
        "haiku",
        (
            "default (Default (recommended))",
            "sonnet[1m] (Sonnet (1M context))",
            "opus[1m] (Opus (1M context))",
            "haiku (Haiku)",
        ),
    )
    by_name = choose_model("opus (1m context)", CLAUDE, None, agent="Claude")
    assert isinstance(by_name, ModelChoice) and by_name.model == "opus[1m]"
    current = choose_model("default", CLAUDE, None, agent="Claude")
    assert isinstance(current, ModelChoice) and current.setting is None


def test_a_model_the_agent_does_not_offer_is_refused_naming_the_offered_ones() -> None:
    refused = choose_model("gpt-5", CLAUDE, None, agent="Claude")
    assert isinstance(refused, Unavailable)
    assert refused.reason.startswith("Claude does not offer the model 'gpt-5'; it offers: default")
    assert "haiku (Haiku)" in refused.reason


def test_the_legacy_models_field_is_used_when_no_config_option_offers_models() -> None:
    models = {
        "currentModelId": "a",
        "availableModels": [{"modelId": "a", "name": "A"}, {"modelId": "b", "name": "B"}],
    }
    choice = choose_model("B", [], models, agent="X")
    assert isinstance(choice, ModelChoice)
    assert choice.setting == Setting("session/set_model", {"modelId": "b"}, "the model b, as asked")
    assert isinstance(choose_model("c", [], models, agent="X"), Unavailable)


def test_with_no_choice_offered_only_the_presets_own_way_can_pass_a_model() -> None:
    assert choose_model("m", [], None, agent="X", own_way="OPENAI_MODEL") == ModelChoice(
        None, "m", ()
    )
    nothing = choose_model("m", [], None, agent="X")
    assert isinstance(nothing, Unavailable) and "offers no choice of model" in nothing.reason


def test_options_that_let_the_agent_act_alone_are_switched_to_asking_and_never_on() -> None:
    assert asking_settings(CLAUDE).settings == ()  # default asks already
    assert asking_settings(COPILOT).settings == ()  # allow_all off, mode agent
    qwen = asking_settings(QWEN_AUTO, preferred="default")
    assert qwen.settings == (
        Setting(
            "session/set_config_option",
            {"configId": "mode", "value": "default"},
            "mode default: auto would act without asking",
        ),
    )
    on = options(select("allow_all", "on", [("on", "On"), ("off", "Off")]))
    assert [s.params for s in asking_settings(on).settings] == [
        {"configId": "allow_all", "value": "off"}
    ]
    boolean = options({"id": "yolo", "name": "YOLO", "type": "boolean", "currentValue": True})
    assert [s.params for s in asking_settings(boolean).settings] == [
        {"configId": "yolo", "type": "boolean", "value": False}
    ]


def test_an_option_with_no_asking_value_is_reported_as_acting_alone() -> None:
    stuck = options(select("mode", "yolo", [("yolo", "YOLO"), ("auto", "Auto")], category="mode"))
    assert asking_settings(stuck).alone == ("mode",)


def test_acting_alone_is_judged_by_effect() -> None:
    mode, allow_all = COPILOT
    assert acts_alone(mode) is None  # "agent": the asking default of Copilot, not a yolo
    assert acts_alone(mode, COPILOT_MODE + "autopilot") is True
    assert acts_alone(allow_all) is False and acts_alone(allow_all, "on") is True
    claude_mode = CLAUDE[0]
    assert acts_alone(claude_mode) is False
    for value in ("acceptEdits", "dontAsk", "bypassPermissions"):
        assert acts_alone(claude_mode, value) is True, value
    assert acts_alone(CLAUDE[1]) is None  # a model says nothing about asking
    unrelated = options(
        {"id": "autoCompact", "name": "Auto compact", "type": "boolean", "currentValue": True}
    )
    assert acts_alone(unrelated[0]) is None
