// grad!(tape; (pow(x, 3) * leaky_relu(x, slope) + clamp(x, -1, hi), mean(gelu(x) - silu(x) / softplus(x) + exp(log(sqrt(abs(x))))) , relu(tanh(-x))))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        static __GRAD_REGION_0: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused pow(x, 3) * leaky_relu(x, slope) + clamp(x, -1, hi)",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    pow(leaf(0), param(0)),
                    leaky_relu(leaf(0), param(1)),
                    mul(step(0), step(1)),
                    clamp(leaf(0), param(2), param(3)),
                    add(step(2), step(3)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            4,
        );
        let __t0 = ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_0,
            [::grad_runtime::dsl::Operand::Var(x)],
            [
                ::grad_runtime::dsl::lit(3.0f32, 3.0f64),
                slope,
                ::grad_runtime::dsl::lit(-1.0f32, -1.0f64),
                hi,
            ],
        );
        static __GRAD_REGION_1: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused mean(gelu(x) - silu(x) / softplus(x) + exp(log(sqrt(abs(x)))))",
            {
                use ::grad_runtime::dsl::step::*;
                &[
                    gelu(leaf(0)),
                    silu(leaf(0)),
                    softplus(leaf(0)),
                    div(step(1), step(2)),
                    sub(step(0), step(3)),
                    abs(leaf(0)),
                    sqrt(step(5)),
                    log(step(6)),
                    exp(step(7)),
                    add(step(4), step(8)),
                    mean(step(9)),
                ]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            0,
        );
        let __t1 = ::grad_runtime::dsl::fused(
            __tape,
            &__GRAD_REGION_1,
            [::grad_runtime::dsl::Operand::Var(x)],
            [],
        );
        static __GRAD_REGION_2: ::grad_runtime::dsl::Plan = ::grad_runtime::dsl::Plan::new(
            "fused relu(tanh(-x))",
            {
                use ::grad_runtime::dsl::step::*;
                &[neg(leaf(0)), tanh(step(0)), relu(step(1))]
            },
            &[
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
                ::grad_runtime::dsl::here(),
            ],
            1,
            0,
        );
        (
            __t0,
            __t1,
            ::grad_runtime::dsl::fused(
                __tape,
                &__GRAD_REGION_2,
                [::grad_runtime::dsl::IntoOperand::into_operand(x)],
                [],
            ),
        )
    }
}
