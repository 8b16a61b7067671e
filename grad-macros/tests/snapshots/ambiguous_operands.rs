// grad!(tape; lr * x + bias - cfg.shift / 2.0)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused lr * x + bias - cfg.shift / 2.0",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    mul(leaf(0), leaf(1)),
                    add(step(0), leaf(2)),
                    div(leaf(3), param(0)),
                    sub(step(1), step(2)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            4,
            1,
        );
        ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [
                ::grad_runtime::dsl::IntoOperand::into_operand(lr),
                ::grad_runtime::dsl::IntoOperand::into_operand(x),
                ::grad_runtime::dsl::IntoOperand::into_operand(bias),
                ::grad_runtime::dsl::IntoOperand::into_operand(cfg.shift),
            ],
            [::grad_runtime::dsl::lit(2.0f32, 2.0f64)],
        )
    }
}
