"""Fits: sweep results -> transition points -> the law ln d_x = a + b·g(L) -> projections.

Stable API (import from the modules; this package imports nothing so ``depthwidth query`` stays
light):

    options.FitOptions(pairs=, assign=, bootstrap=, resample=, seed=)   the fit's options and their
                                                    defaults; .kwargs() for the two functions below;
                                                    options.MIN_FRACTION (crossing share to be fitted)
    table.load_table(results) -> ResultsTable       runs / cells (per (n_layer, d_model): N, ln_N,
                                                    n_seeds, mean, std, sem) / excluded / unfinished
                                                    (kind "train" records; other kinds set aside)
    transitions.compute_transitions(table, pairs=, assign=, bootstrap=, resample=, seed=)
                                   -> (list[TransitionPoint], boot ln N* array (B, n_pairs))
    transitions.find_crossing(x_s, y_s, x_d, y_d) -> Crossing    (x = ln N, y = mean test loss)
    forms.FORMS {key: LawForm}                      the law's functional forms, g(L) = L (default,
                                                    "linear-depth") or ln L ("log-depth"); each has
                                                    fit, ln_width(_var), ln_size, depth_upper
    lawfit.fit_law(L, ln_d, sigma, form=) -> LawFit   weighted least squares of the form
    lawfit.build_fit(table, ..., conventions=True, law_form=) -> dict   the fit-file dict (format in
                                                    law's docstring); by_assign: the law per depth convention
    transitions.format_interval(ci, open_side, N_range) -> str   a 95% interval of N* as text
    lrscan.load_scan(results, c, power) -> rows      per shape: best lr, what lr = c/d^power costs
    law.levine2020(), law.load_law(spec), law.law_from_fit_dict(d, source) -> Law (a form with a, b, cov)
    projections.optimal_depth(N, law, vocab=0), law_width(L, law), transition_params(L, law),
    projections.query_budget / query_depth / query_shape(...) -> dict   (what ``query`` prints)
    projections.answerable(law, vocab=0) -> {min_budget, max_budget, depth_cap}   the range a query answers
    projections.classify(depth, optimal, tolerance) -> "too deep" | "too wide" | "near optimal"
    synthetic.write_synthetic(results, Surface(...)) -> dict   known-law record.json files

CLI: ``depthwidth fit``, ``depthwidth lrscan`` and ``depthwidth query`` (:mod:`depthwidth.fits.cli`).
"""
