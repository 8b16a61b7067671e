// grad!(tape; layer_norm(dropout(x, 0.1, &mut rng, train), gamma, beta, 1e-5))

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::g_dropout(
            __tape,
            x,
            ::grad_runtime::dsl::lit(0.1f32, 0.1f64),
            &mut rng,
            train,
        );
        ::grad_runtime::g_layer_norm(
            __tape,
            __t0,
            gamma,
            beta,
            ::grad_runtime::dsl::lit(1e-5f32, 1e-5f64),
        )
    }
}
