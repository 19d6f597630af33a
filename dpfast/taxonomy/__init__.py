"""Taxonomies of categorical attributes: trees, semantic distance, marginality, order.

A :class:`Taxonomy` is a rooted tree of labels whose leaves are the attribute's *domain*:
the values a record may hold. It is read from an ARX hierarchy file
(:meth:`Taxonomy.from_arx`), built from a nested mapping (:meth:`Taxonomy.from_mapping`),
or taken from any accepted form, a flat list of leaves included, by :func:`as_taxonomy`,
and gives what the categorical methods of Sánchez et al. (2016) need (docs/design.md#categorical):

* the semantic distance of Eq. 3, computed on ancestor bitsets (:meth:`Taxonomy.distance`,
  :meth:`Taxonomy.distance_matrix`);
* marginality (Eq. 4), the domain's most marginal value ``v*`` and the value ``t*``
  farthest from it (:attr:`Taxonomy.boundary`), and the largest distance ``Δq``
  (:attr:`Taxonomy.max_distance`), the exponential mechanism's sensitivity;
* the data-independent total order of docs/design.md#marginality (:meth:`Taxonomy.order`);
* the cost matrices behind cluster qualities and centroids for microaggregation
  (docs/design.md#semantic-centroid, #em-centroid, #imdav-categorical; see
  :mod:`dpfast.partitions.categorical`);
* the normalised per-attribute distance of insensitive MDAV (docs/design.md#imdav-order):
  :meth:`Taxonomy.normalised_distance`.

The tree itself (parents, children, depths, the leaves under each node) is exposed for
methods that generalise values, such as DiffGen.

Conventions
-----------
* Nodes are identified by their labels (strings), which must be unique in the tree. Node
  ``0`` is the root; nodes are numbered breadth first, children in label order.
* The domain is the set of leaves, in *canonical order*: sorted by label (Python string
  order). Domain codes ``0 .. m-1`` follow that order, and every tie in this module
  (most marginal value, order, centroid) goes to the lower code.
* Ancestor sets include the node itself and the root (docs/design.md#semantic-distance), so
  distances lie in ``[0, 1)``.
"""

from __future__ import annotations

from dpfast.taxonomy._taxonomy import Taxonomy, as_taxonomy
from dpfast.taxonomy._tree import TaxonomyError

__all__ = ["Taxonomy", "TaxonomyError", "as_taxonomy"]
