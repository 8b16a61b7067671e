// grad!(tape; let h = x @ w; sigmoid(h + b) * linear(h, w) - h / 2)

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let h = ::grad_runtime::g_matmul(__tape, x, w);
        let __t0 = linear(__tape, h, w);
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused sigmoid(h + b) * linear(h, w) - h / 2",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    add(leaf(0), leaf(1)),
                    sigmoid(step(0)),
                    mul(step(1), leaf(2)),
                    div(leaf(0), param(0)),
                    sub(step(2), step(3)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            3,
            1,
        );
        ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [
                ::grad_runtime::dsl::Operand::Var(h),
                ::grad_runtime::dsl::IntoOperand::into_operand(b),
                ::grad_runtime::dsl::Operand::Var(__t0),
            ],
            [::grad_runtime::dsl::lit(2.0f32, 2.0f64)],
        )
    }
}
