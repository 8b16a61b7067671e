// grad!(tape; x: [B, T, C]; (reshape(x, [B, T, h, C / h]), slice(x, [0, 1, 0], [B, T, C - 1]), reshape(x, [B, (T + T) * C / 2])))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let mut __shapes = ::grad_runtime::dsl::Declared::new(["B", "T", "C"]);
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
        let [__dim_B, __dim_T, __dim_C] = __shapes.sizes();
        let __size0 = ::grad_runtime::dsl::size_div(__tape, __dim_C, h, "C / h");
        let __t1 = ::grad_runtime::g_reshape(__tape, x, &[__dim_B, __dim_T, h, __size0]);
        let __size2 = ::grad_runtime::dsl::size_sub(__tape, __dim_C, 1, "C - 1");
        let __t3 = ::grad_runtime::g_slice(
            __tape,
            x,
            &[0, 1, 0],
            &[__dim_B, __dim_T, __size2],
        );
        let __size4 = ::grad_runtime::dsl::size_div(
            __tape,
            (__dim_T + __dim_T) * __dim_C,
            2,
            "(T + T) * C / 2",
        );
        (__t1, __t3, ::grad_runtime::g_reshape(__tape, x, &[__dim_B, __size4]))
    }
}
