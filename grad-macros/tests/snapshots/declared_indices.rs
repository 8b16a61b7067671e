// grad!(tape; wte: [V, C], tokens: [B, T], targets: [B, T]; cross_entropy(embedding(wte, &tokens) @ transpose(wte), targets))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let mut __shapes = ::grad_runtime::dsl::Declared::new(["V", "C", "B", "T"]);
        __shapes
            .check(
                __tape,
                "wte",
                wte,
                &[::grad_runtime::dsl::Dim::Sym(0), ::grad_runtime::dsl::Dim::Sym(1)],
            );
        __shapes
            .check_indices(
                __tape,
                "tokens",
                &tokens,
                &[::grad_runtime::dsl::Dim::Sym(2), ::grad_runtime::dsl::Dim::Sym(3)],
            );
        __shapes
            .check_indices(
                __tape,
                "targets",
                &targets,
                &[::grad_runtime::dsl::Dim::Sym(2), ::grad_runtime::dsl::Dim::Sym(3)],
            );
        let __t0 = ::grad_runtime::g_embedding(__tape, wte, &tokens);
        let __t1 = ::grad_runtime::g_transpose(__tape, wte);
        let __t2 = ::grad_runtime::g_matmul(__tape, __t0, __t1);
        ::grad_runtime::g_cross_entropy(__tape, __t2, targets)
    }
}
