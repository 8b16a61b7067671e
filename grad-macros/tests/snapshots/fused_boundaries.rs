// grad!(tape; let h = relu(x + b); let s = sum(h); (h * s, exp(s) + 1))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused relu(x + b)",
            {
                use ::grad_runtime::dsl::step::*;
                &[add(leaf(0), leaf(1)), relu(step(0))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
            2,
            0,
        );
        let h = ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(b),
            ],
            [],
        );
        let s = ::grad_runtime::g_sum(__tape, h);
        let __t0 = ::grad_runtime::g_mul(__tape, h, s);
        static __GRAD_REGION_1: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused exp(s) + 1",
            {
                use ::grad_runtime::dsl::step::*;
                &[exp(leaf(0)), add(step(0), param(0))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
            1,
            1,
        );
        (
            __t0,
            ::grad_runtime::dsl::fused(
                __tape,
                &__GRAD_REGION_1,
                [::grad_runtime::dsl::Operand::Var(s)],
                [::grad_runtime::dsl::lit(1.0f32, 1.0f64)],
            ),
        )
    }
}
