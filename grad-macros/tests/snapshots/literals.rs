// grad!(tape; (2.0 * x + 1, x - 0.5, 1.0 - x, 2.0 / x, x / 2, -3.0 * x, x * 1e-3f32))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused 2.0 * x + 1",
            {
                use ::grad_runtime::dsl::step::*;
                &[mul(param(0), leaf(0)), add(step(0), param(1))]
            },
            &[::grad_runtime::dsl::here(), ::grad_runtime::dsl::here()],
            1,
            2,
        );
        let __t0 = ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [::grad_runtime::dsl::IntoOperand::into_operand(x)],
            [
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
                ::grad_runtime::dsl::lit(1.0f32, 1.0f64),
            ],
        );
        let __t1 = ::grad_runtime::dsl::sub(
            __tape,
            x,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(0.5f32, 0.5f64),
            ),
        );
        let __t2 = ::grad_runtime::dsl::sub(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(1.0f32, 1.0f64),
            ),
            x,
        );
        let __t3 = ::grad_runtime::dsl::div(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
            ),
            x,
        );
        let __t4 = ::grad_runtime::dsl::div(
            __tape,
            x,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(2.0f32, 2.0f64),
            ),
        );
        let __t5 = ::grad_runtime::dsl::mul(
            __tape,
            ::grad_runtime::dsl::Operand::Scalar(
                ::grad_runtime::dsl::lit(-3.0f32, -3.0f64),
            ),
            x,
        );
        (
            __t0,
            __t1,
            __t2,
            __t3,
            __t4,
            __t5,
            ::grad_runtime::dsl::mul(
                __tape,
                x,
                ::grad_runtime::dsl::Operand::Scalar(1e-3f32),
            ),
        )
    }
}
