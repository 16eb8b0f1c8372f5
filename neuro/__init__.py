"""Model discovery against a simulated larval zebrafish (simZFish-like ground truth)."""


def run_study(**options):
    """The zebrafish discovery study from Python, as ``scimech neuro study`` runs it: :func:`scimech.studies.run_study`
    with ``"neuro"`` (its keywords are the command's options: ``scimech.studies.study_options("neuro")``).

    Examples
    --------
    >>> import neuro
    >>> result = neuro.run_study(out="runs/neuro/mine", nodes=2, n_seeds=1, long_context=0, duration=1.0)  # doctest: +SKIP
    >>> print(result.report)  # doctest: +SKIP
    runs/neuro/mine/report.md
    >>> neuro.run_study(sizes="quick")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scimech.errors.ConfigError: run_study('neuro'): no option sizes; did you mean size? ...
    """
    from scimech.studies import run_study as run  # lazy: `import neuro` stays light

    return run("neuro", **options)
