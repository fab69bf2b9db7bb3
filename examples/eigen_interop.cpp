// eigen_interop: moving data between Eigen and tessera without copies.
//
//   tessera::view_of(m)      an Eigen matrix (or Map, Ref, block) as a tessera view: no copy;
//   tessera::as_eigen(v)     a rank-2 tessera view as an Eigen::Map with its strides: no copy;
//   tessera::from_eigen(s,m) a copy of an Eigen expression into a new tensor.
//
// Inside a session, an Eigen routine can work directly on a tessera tensor through as_eigen,
// and a tessera op can read or write an Eigen matrix through view_of.
#include <tessera/eigen.hpp>
#include <tessera/tessera.hpp>

#include <Eigen/Dense>

#include <cmath>
#include <cstdio>

int main() {
    tessera::backend be;

    Eigen::MatrixXd m(3, 3);  // column-major, owned by Eigen
    m << 4, 1, 0,
         1, 3, 1,
         0, 1, 2;

    const double error = be.run([&](tessera::session& s) {
        // Eigen -> tessera, zero-copy: the view has m's column-major strides [1, 3].
        tessera::tensor_view<double> mv = tessera::view_of(m);

        // A tessera op reading Eigen's memory: B = M @ M^T, a new tensor.
        tessera::tensor<double> b = tessera::matmul(s, mv, mv.transpose());

        // tessera -> Eigen, zero-copy: an Eigen::Map over the tensor's storage. Eigen's own
        // Cholesky runs on it in place of a copy.
        auto bm = tessera::as_eigen(b);
        Eigen::LLT<Eigen::MatrixXd> llt(bm);

        // tessera writing into Eigen's memory: the out-parameter is a view of an Eigen matrix.
        Eigen::MatrixXd l(3, 3);
        tessera::cholesky(s, b, tessera::view_of(l));

        // Both factorisations agree; from_eigen copies an Eigen expression into a tensor.
        tessera::tensor<double> diff = tessera::from_eigen(s, (l - Eigen::MatrixXd(llt.matrixL())).eval());
        double worst = 0;
        for (double v : diff.values()) worst = std::fmax(worst, std::fabs(v));
        std::printf("B = M M^T:\n");
        std::printf("%s\n", tessera::to_string(b).c_str());
        return worst;
    });
    const bool agree = error < 1e-12;
    std::printf("Eigen's and tessera's Cholesky factors %s (largest difference %.1e)\n",
                agree ? "agree" : "DIFFER", error);
    return agree ? 0 : 1;
}
