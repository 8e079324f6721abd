from rspo_gym.rollout.prompts import ALFWORLD, GENERIC, WEBSHOP, PromptBuilder, parse_action, template_for


def test_template_for_env_families():
    assert template_for("rspo/ALFWorld-v0") is ALFWORLD
    assert template_for("rspo/WebShop-v0") is WEBSHOP
    assert template_for("FrozenLake-v1") is GENERIC
    assert template_for(None) is GENERIC


def test_first_step_has_no_history_and_drops_help():
    text = PromptBuilder(ALFWORLD).build("put a mug in desk.", "You are in a room.", ["look", "help", "go to desk 1"])
    assert "Your current observation is: You are in a room." in text
    assert "'help'" not in text and "'look'\n 'go to desk 1'" in text
    assert "Prior to this step" not in text
    assert text.endswith("Reply with one admissible action only.")


def test_history_shows_the_last_k_pairs_numbered_from_the_episode_start():
    history = [("o1", "a1"), ("o2", "a2"), ("o3", "a3")]
    text = PromptBuilder(ALFWORLD, history_length=2, think=True).build("t", "o4", ["look"], history)
    assert "already taken 3 step(s)" in text and "most recent 2 observations" in text
    assert "[Observation 2: 'o2', Action 2: 'a2']" in text and "[Observation 3: 'o3', Action 3: 'a3']" in text
    assert "Observation 1:" not in text
    assert "You are now at step 4" in text and "<think> </think>" in text


def test_webshop_prompt_strips_the_instruction_from_the_page():
    obs = "Instruction: [SEP] buy red shoes [SEP] Back to Search [SEP] Page 1"
    text = PromptBuilder(WEBSHOP).build("buy red shoes", obs, ["click[back to search]"])
    assert "Your current observation is: Back to Search [SEP] Page 1." in text
    assert "'click[back to search]'" in text


def test_parse_action_follows_verl_agent():
    ok = parse_action("<think>x</think> <action>Go To Desk 1</action>", think=True)
    assert ok.action == "go to desk 1" and ok.format_valid
    no_think = parse_action("<action>look</action>", think=True)
    assert not no_think.format_valid and no_think.action == "look"  # still sent, as verl-agent does
    two = parse_action("<think>x</think><action>a</action><action>b</action>", think=True)
    assert two.format_valid and two.action == "a"  # the first block, as verl-agent's str.find
    cjk = parse_action("<think>x</think><action>拿</action>", think=True)
    assert not cjk.format_valid
    tail = parse_action("x" * 50 + "go to desk 1", think=True, tail_chars=12)
    assert tail.action == "go to desk 1" and not tail.format_valid
    assert parse_action("  Look \n", think=False) == parse_action("look", think=False)
    assert not parse_action("   ", think=False).format_valid


def test_alfworld_banner_is_dropped_and_zero_history_keeps_the_task():
    obs = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room."
    first = PromptBuilder(ALFWORLD).build("put a mug in desk.", obs, ["look"])
    assert "Welcome" not in first and "Your current observation is: You are in the middle of a room." in first
    later = PromptBuilder(ALFWORLD, history_length=0).build("put a mug in desk.", "o2", ["look"], [("o1", "look")])
    assert "Your task is to: put a mug in desk." in later and "Observation 1" not in later
