// grad!(#[nofuse] tape; x * { 1.0 / n as f32 } + { offsets[3] })

fn expansion() {
    {
        use ::grad_runtime::dsl::AsTape as _;
        let __tape = (tape).as_tape();
        let __t0 = ::grad_runtime::dsl::mul(__tape, x, 1.0 / n as f32);
        ::grad_runtime::dsl::add(__tape, __t0, offsets[3])
    }
}
