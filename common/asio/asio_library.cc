// The compiled parts of Boost.Asio (with its SSL support) and Boost.Beast, built once here.
// Every file of the build sees BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION (the top-level CMakeLists.txt), so their headers declare these
// functions instead of defining them inline in each file that includes them.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
