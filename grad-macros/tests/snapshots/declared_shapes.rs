// grad!(tape; x: [B, T, D], w: [D, E], b: [E]; let y = x @ w + b; reshape(y, [B * T, E]))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let mut __shapes = ::grad_runtime::dsl::Declared::new(["B", "T", "D", "E"]);
        __shapes
            .check(
                __tape,
                "x",
                x,
                &[
                    ::grad_runtime::dsl::Dim::Sym(0),
                    ::grad_runtime::dsl::Dim::Sym(1),
                    ::grad_runtime::dsl::Dim::Sym(2),
                ],
            );
        __shapes
            .check(
                __tape,
                "w",
                w,
                &[::grad_runtime::dsl::Dim::Sym(2), ::grad_runtime::dsl::Dim::Sym(3)],
            );
        __shapes.check(__tape, "b", b, &[::grad_runtime::dsl::Dim::Sym(3)]);
        let [__dim_B, __dim_T, _, __dim_E] = __shapes.sizes();
        let __t0 = ::grad_runtime::g_matmul(__tape, x, w);
        let y = ::grad_runtime::g_add(__tape, __t0, b);
        ::grad_runtime::g_reshape(__tape, y, &[__dim_B * __dim_T, __dim_E])
    }
}
