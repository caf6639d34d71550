// Every error that the Rust form adds to the language's (E001 for what is not a schema, and the
// macro's own arguments), one module each: all are reported in one compilation.
use easeml_macros::easeml_schema;

#[easeml_schema]
mod other_item {
    fn helper() {}
    pub struct Input(Tensor<3>);
    pub struct Output(Tensor<2>);
}

#[easeml_schema]
mod other_struct {
    pub struct Inputs(Tensor<3>);
    pub struct Output(Tensor<2>);
}

#[easeml_schema]
mod generic {
    pub struct Input<T>(Tensor<3>, T);
    pub struct Output(Tensor<2>);
}

#[easeml_schema]
mod shape_twice {
    pub struct Input {
        #[shape(3)]
        pub x: Tensor<3>,
    }
    pub struct Output(Tensor<2>);
}

#[easeml_schema]
mod suffixed_dimension {
    pub struct Input(Tensor<3u8>);
    pub struct Output(Tensor<2>);
}

#[easeml_schema]
mod named_dimension {
    pub struct Input(Tensor<N>);
    pub struct Output(Tensor<2>);
}

#[easeml_schema(constraint(train_time <= "30m"))]
mod quoted_limit {
    pub struct Input(Tensor<3>);
    pub struct Output(Tensor<2>);
}

#[easeml_schema(labels = [a, b] constraint(train_time <= 30m))]
mod missing_comma {
    pub struct Input(Tensor<3>);
    pub struct Output(Tensor<2>);
}

#[easeml_schema]
fn not_a_module() {}

fn main() {}
