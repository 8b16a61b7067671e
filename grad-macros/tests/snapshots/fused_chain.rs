// grad!(tape; tanh(x * 0.9 + 0.1))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused tanh(x * 0.9 + 0.1)",
            {
                use ::grad_runtime::dsl::step::*;
                &[mul(leaf(0), param(0)), add(step(0), param(1)), tanh(step(1))]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            2,
        );
        ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [::grad_runtime::dsl::IntoOperand::into_operand(x)],
            [
                ::grad_runtime::dsl::lit(0.9f32, 0.9f64),
                ::grad_runtime::dsl::lit(0.1f32, 0.1f64),
            ],
        )
    }
}
