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


def test_eval_curves_and_seconds_join_the_plots(tmp_path, monkeypatch):
  drawn = []
  real_plot = plots.plt.Axes.plot

  def plot(self, *args, **kwargs):
    drawn.append((kwargs.get("label"), list(args[0]), list(args[1])))
    return real_plot(self, *args, **kwargs)

  monkeypatch.setattr(plots.plt.Axes, "plot", plot)
  rows = [{"step": 0, "eval/acc@1": 0.0, "seconds_eval": 4.0},
          {"step": 1, "acc@1": 0.5, "seconds_rollout": 1.0},
          {"step": 2, "acc@1": 0.75, "eval/acc@1": 0.25, "seconds_rollout": 1.0,
           "seconds_eval": 3.0}]
  assert len(plots.write_plots(rows, 1, tmp_path)) == 3
  assert drawn == [("Acc@1 (training prompts, pruned)", [1, 2], [0.5, 0.75]),
                   ("eval Acc@1 (no pruning)", [0, 2], [0.0, 0.25])]
