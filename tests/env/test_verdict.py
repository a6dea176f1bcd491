from leap_jax.env.verdict import Status, Timing, Verdict, feedback_text, scrub


def test_scrub_removes_paths_and_caps():
  text = "Traceback\n" + "\n".join(
      f'  File "/root/x/site-packages/jax/_src/core.py", line {i}' for i in range(40))
  out = scrub(text + "\nValueError: bad")
  assert "/root" not in out and "core.py" in out
  assert out.endswith("ValueError: bad")
  assert len(out.splitlines()) <= 12


def test_feedback_is_deterministic_and_complete():
  v = Verdict("level1/relu", Status.WRONG_OUTPUT, "Tolerances: atol=1e-06.",
              errors={"max_abs": 0.5, "max_rel": 2.0, "mismatch_share": 0.25})
  text = feedback_text(v)
  assert text == feedback_text(v)
  assert text.startswith("Status: wrong_output.")
  assert "Max abs error 0.5" in text and "25.00%" in text


def test_ok_feedback_labels_interpret_timing():
  t = Timing(speedup=1.0, raw_speedup=1.03, ci_low=0.9, ci_high=1.1, band=0.05,
             rounds=20, ref_seconds=1e-3, cand_seconds=1e-3, interpret=True)
  v = Verdict("level1/relu", Status.OK, timing=t)
  assert v.correct and v.speedup == 1.0
  assert "inside the noise band" in v.feedback
  assert "interpret mode on CPU" in v.feedback
  assert v.to_json()["speedup"] == 1.0


def test_status_values_are_the_taxonomy():
  assert {s.value for s in Status} == {
      "no_code", "syntax_error", "missing_entry_point", "forbidden", "no_kernel",
      "compute_outside_kernel", "lowering_error", "runtime_error", "timeout",
      "crashed", "wrong_output", "ok", "harness_error"}
