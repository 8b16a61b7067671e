// grad!(tape; logits: [N, 10]; cross_entropy(log_softmax(logits, -1), &targets))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let mut __shapes = ::grad_runtime::dsl::Declared::new(["N"]);
        __shapes
            .check(
                __tape,
                "logits",
                logits,
                &[::grad_runtime::dsl::Dim::Sym(0), ::grad_runtime::dsl::Dim::Fixed(10)],
            );
        let __t0 = ::grad_runtime::g_log_softmax(__tape, logits, -1);
        ::grad_runtime::g_cross_entropy(__tape, __t0, &targets)
    }
}
