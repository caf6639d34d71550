use easeml_macros::easeml_schema;

#[easeml_schema(file = "examples/breast_cancer.eml")]
mod not_empty {
    pub struct Input(Tensor<30>);
}

#[easeml_schema(file = "examples/breast_cancer.eml", labels = [a, b])]
mod arguments_beside_the_file {}

fn main() {}
