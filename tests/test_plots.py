import os

from leap_jax import plots


def test_writes_three_pngs(tmp_path):
  rows = [{"step": s, "acc@1": 0.1 * s, "acc@2": 0.15 * s, "budgets": [1, 2, 2],
           "seconds_rollout": 2.0, "seconds_env": 1.0, "seconds_update": 0.5}
          for s in (1, 2, 3)]
  paths = plots.write_plots(rows, 2, tmp_path)
  assert [os.path.basename(p) for p in paths] == ["acc.png", "budgets.png",
                                                   "phases.png"]
  for p in paths:
    with open(p, "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_no_rows_no_files(tmp_path):
  assert plots.write_plots([], 3, tmp_path / "none") == []
  assert not os.path.exists(tmp_path / "none")
