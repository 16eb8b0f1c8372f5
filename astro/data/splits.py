"""Training and test galaxies split by object, not by row.

A catalogue may hold one object on several rows: a DESI redshift catalogue has a row per
spectrum (a target observed on two tiles is two rows with one ``TARGETID``), and sweep files
joined or concatenated repeat a Tractor source (one ``RELEASE``, ``BRICKID``, ``OBJID``). Split
by row, such an object lands in training and test, and the test scores what the model saw.
The split here is scikit-learn's :class:`~sklearn.model_selection.GroupShuffleSplit` over the
object identity:

* ``TARGETID`` (DESI; it encodes the Legacy Survey release, brick and object), else
* ``RELEASE`` + ``BRICKID`` + ``OBJID`` (the Legacy Survey Tractor / sweep catalogues: ``OBJID``
  numbers the sources within a brick of a release; DESI target files call it ``BRICK_OBJID``), else
* ``BRICKID`` + ``OBJID``, else each row its own object (the reading says so).

One galaxy can also carry two identities: the DR10 south (DECam, ``RELEASE`` 10000+) and the north
(BASS / MzLS, ``RELEASE`` 9010, 9011, from DR9) overlap around Dec 32.375 deg, and sweeps of both
concatenated hold such a galaxy twice under other ``RELEASE``, ``BRICKID`` and ``OBJID``.
:func:`join_positions` makes rows of *different* releases within :data:`MATCH_RADIUS_ARCSEC` of each
other one object (astropy's :meth:`~astropy.coordinates.SkyCoord.search_around_sky`); sources of
one release that close are two deblended sources and stay two.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scimech.errors import ConfigError

__all__ = [
    "IDENTITIES",
    "MIN_TEST",
    "MATCH_RADIUS_ARCSEC",
    "split_catalogue",
    "identity_columns",
    "object_groups",
    "join_positions",
    "split_by_object",
    "duplicates",
]

#: the identities looked for, first match wins
IDENTITIES: tuple[tuple[str, ...], ...] = (
    ("TARGETID",),
    ("RELEASE", "BRICKID", "OBJID"),
    ("RELEASE", "BRICKID", "BRICK_OBJID"),
    ("BRICKID", "OBJID"),
    ("BRICKID", "BRICK_OBJID"),
)

#: rows of different releases closer than this [arcsec] are one source (north and south photometry of one galaxy
#: agree to about 0.1", both tied to Gaia)
MATCH_RADIUS_ARCSEC = 0.5

#: test objects the probes need at least (5-fold cross-validation by object, 2 per fold)
MIN_TEST = 10


def identity_columns(names) -> tuple[str, ...]:
    """The identity columns (upper case) present among ``names`` (any case); ``()`` when none."""
    upper = {str(n).upper() for n in names}
    return next((cols for cols in IDENTITIES if all(c in upper for c in cols)), ())


def object_groups(columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """One integer per row, equal for rows of one object (``columns``: the identity columns' values)."""
    arrays = [np.asarray(v).astype(np.int64) for v in columns.values()]
    if not arrays:
        raise ValueError("no identity column")
    _, groups = np.unique(np.stack(arrays, axis=1), axis=0, return_inverse=True)
    return groups.ravel()


def join_positions(
    groups: np.ndarray, ra: np.ndarray, dec: np.ndarray, release: np.ndarray, radius_arcsec: float = MATCH_RADIUS_ARCSEC
) -> tuple[np.ndarray, int]:
    """``groups`` with the rows of different ``release`` within ``radius_arcsec`` of each other made one
    object (transitively), and how many rows were joined to another release's source.

    ``ra``, ``dec`` in degrees; rows with a non-finite position keep their group."""
    import astropy.units as u
    from astropy.coordinates import SkyCoord
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    groups = np.asarray(groups)
    ra, dec, release = np.asarray(ra, float), np.asarray(dec, float), np.asarray(release)
    ok = np.flatnonzero(np.isfinite(ra) & np.isfinite(dec))
    if len(np.unique(release[ok])) < 2:
        return groups, 0
    sky = SkyCoord(ra[ok] * u.deg, dec[ok] * u.deg)
    i, j, _, _ = sky.search_around_sky(sky, radius_arcsec * u.arcsec)
    i, j = ok[i], ok[j]
    other = release[i] != release[j]
    i, j = i[other], j[other]
    if not len(i):
        return groups, 0
    _, dense = np.unique(groups, return_inverse=True)
    dense = dense.ravel()
    m = int(dense.max()) + 1
    graph = coo_matrix((np.ones(len(i)), (dense[i], dense[j])), shape=(m, m))
    _, label = connected_components(graph, directed=False)
    return label[dense], len(np.unique(np.concatenate([i, j])))


def duplicates(groups: np.ndarray) -> tuple[int, int]:
    """``(rows that share their object with another row, objects on more than one row)``."""
    _, counts = np.unique(groups, return_counts=True)
    return int(counts[counts > 1].sum()), int((counts > 1).sum())


def split_by_object(groups: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(train, test)``, sorted, with every object on one side only.

    ``test_fraction`` of the *objects* go to the test set (scikit-learn's
    :class:`~sklearn.model_selection.GroupShuffleSplit`, ``random_state=seed``: it rounds the
    test objects up); a ``ConfigError`` when either side would be empty.
    """
    from sklearn.model_selection import GroupShuffleSplit

    groups = np.asarray(groups)
    n_objects = len(np.unique(groups))
    if n_objects < 2:
        raise ConfigError(
            f"the catalogue holds {n_objects} object(s) once rows of one object are kept together; "
            "a training and a test set need at least 2: bring more galaxies."
        )
    try:
        train, test = next(
            GroupShuffleSplit(n_splits=1, test_size=test_fraction, random_state=seed).split(
                np.zeros(len(groups)), groups=groups
            )
        )
    except ValueError as err:  # sklearn: a test or training set of 0 objects
        raise ConfigError(
            f"--test-fraction {test_fraction} of {n_objects} objects leaves the training or the test set "
            f"empty ({err}); choose a fraction that keeps both non-empty."
        ) from None
    return np.sort(train), np.sort(test)


def split_catalogue(sample, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(train, test)`` of a catalogue sample split by object (:func:`astro.data.splits.split_by_object`),
    checked for a test set the probes can use; fills the ``split`` section of ``sample.meta["reading"]``."""
    n = len(sample)
    groups = np.asarray(sample.catalog["object"])
    train, test = split_by_object(groups, test_fraction, seed)
    n_test_objects = len(np.unique(groups[test]))
    if n_test_objects < MIN_TEST:  # the probes' folds keep each object's rows together
        raise ConfigError(
            f"--test-fraction {test_fraction} leaves {n_test_objects} objects ({len(test)} of {n} usable "
            f"rows) for the test set; the probes' 5-fold cross-validation needs at least {MIN_TEST} "
            "(2 per fold): raise --test-fraction or bring more galaxies."
        )
    reading = sample.meta.get("reading")
    if reading is not None:
        n_obj = len(np.unique(groups))
        reading.fact(
            "split",
            "by",
            f"object identity {sample.meta.get('identity', 'row')} (scikit-learn "
            "GroupShuffleSplit: no object in both sets)",
        )
        reading.fact(
            "split",
            "test",
            f"{n_test_objects} of {n_obj} objects ({test_fraction:.0%}, rounded up), {len(test)} rows; seed {seed}",
        )
        reading.fact("split", "training", f"{len(np.unique(groups[train]))} objects, {len(train)} rows")
    return train, test
