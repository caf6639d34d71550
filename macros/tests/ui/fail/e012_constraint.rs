use easeml_macros::easeml_schema;

#[easeml_schema(constraint(memory <= 5m), constraint(train_time <= 30kb))]
mod app {
    pub struct Input(Tensor<3>);
    pub struct Output(Tensor<3>);
}

fn main() {}
