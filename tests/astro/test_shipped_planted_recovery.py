"""The shipped planted stand-in (astro/models/weights/planted-degenerate, the model of ``make demo`` and
``scimech astro study --planted``) carries an image advantage, and the study's head study finds both
planted heads from its own intervals, on the galaxies of ``scimech astro study --quick --planted --seed 0``.

The truth is the construction, independent of the study: :class:`astro.models.planted.PlantedAION` lets
only head 1 of block 0 see image tokens and holds head 2's output-projection columns at zero
(``planted_truth()`` checks the weights). The study runs as the user runs it, no block given: the head
study covers every encoder block, so the planted heads are measured in block 0 although the layer
probes, on these galaxies, pick block 2 for findings 3 and 4 (docs/astro.md, "The planted stand-in and
the study"). A planted head no longer recovered, or an image advantage whose interval reaches 0, fails here.
"""

from __future__ import annotations

import pytest

from astro import evidence, recovery, synthetic
from astro.data.files import load_adapter
from astro.models import shipped

WORLD = "degenerate"


@pytest.fixture(scope="module")
def shipped_planted_study():
    choice = shipped.choose_shipped(WORLD, True, "colours")
    assert choice.shipped is not None, choice.reason
    ad = load_adapter(choice.shipped.folder)
    # the quick study's seed-0 galaxies: 1600 training (seed 0), 600 test (seed 1000)
    train = synthetic.make_galaxies(1600, seed=0, world=WORLD)
    test = synthetic.make_galaxies(600, seed=1000, world=WORLD)
    return ad, evidence.gather_evidence(ad, train, test, n_bootstrap=200, seed=0, chunk_size=150)


@pytest.mark.slow  # a whole quick study of the shipped planted stand-in (about two minutes on one core)
def test_the_head_study_finds_both_planted_heads_of_the_shipped_planted_standin(shipped_planted_study):
    ad, res = shipped_planted_study
    truth = ad.model.planted_truth()
    assert (truth["block"], truth["image_head"], truth["inert_colour_head"]) == (0, 1, 2)
    # every block's heads were studied
    assert res["interventions"]["block"].values.tolist() == list(range(ad.num_blocks))
    # the image carries information: the advantage's 95% interval (paired bootstrap) excludes 0
    assert float(res["advantage"]["advantage_low"].sel(population="all")) > 0
    rows = recovery.planted_recovery(res)
    assert [r.recovered for r in rows] == [True, True], [r.found for r in rows]
    # the image head's advantage lost has an interval above 0; the inert head's effects are exactly 0
    assert rows[0].ci_low > 0
    assert rows[1].ci_low == rows[1].ci_high == 0.0
    assert "effects exactly 0 under every intervention" in rows[1].summary
    assert recovery.recovery_line(rows).startswith("astro planted truth: 2 of 2 recovered (image head block0.h1")


@pytest.mark.slow  # reuses the study above
def test_a_planted_finding_says_which_block_its_verdict_and_its_evidence_read(shipped_planted_study):
    _, res = shipped_planted_study
    studied = int(res["interventions"].attrs["block"])
    notes = recovery.planted_findings(res)
    assert notes[2][0] and notes[3][0]  # findings 3 and 4: recovered from the planted-truth rows
    for i in (2, 3):
        if studied != 0:  # the layer probes chose another block than the planted one: the note says so
            assert f"planted in block 0 (recovery.txt), while the evidence above reads block {studied}" in notes[i][1]
        else:
            assert "while the evidence above reads" not in notes[i][1]
