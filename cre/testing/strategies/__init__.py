"""Hypothesis strategies and builders for CRE's inputs, shipped for other packages' tests.

:mod:`cre.testing.strategies.api` derives strategies for every CRD model;
:mod:`cre.testing.strategies.job` builds the Job core's inputs (jobs, pods, Observations) and
models what the shell does with a Plan. Both need the ``test`` extra (hypothesis); nothing in
production imports them.
"""
